// SPDX-License-Identifier: MIT
// MapLookup.java - the JVM's heap: a HashMap of 3 M entries, then 2 M random lookups. Prints the lookup seconds
// and a checksum (docs/runtimes.md). Run: javac -d /tmp bench/runtimes/MapLookup.java && java -cp /tmp MapLookup
import java.util.HashMap;
import java.util.Random;

public class MapLookup {
  public static void main(String[] args) {
    int n = 3_000_000;
    HashMap<Long, String> map = new HashMap<>();
    for (int i = 0; i < n; i++) map.put((long) i * 7919, "v" + i);
    Random random = new Random();
    long[] keys = new long[2_000_000];
    for (int j = 0; j < keys.length; j++) keys[j] = (long) random.nextInt(n) * 7919;
    long sum = 0, start = System.nanoTime();
    for (long key : keys) sum += map.get(key).length();
    System.out.println((System.nanoTime() - start) / 1e9 + " " + sum);
  }
}
