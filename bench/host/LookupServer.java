// SPDX-License-Identifier: MIT
// LookupServer - the JVM service of bench/host: a large HashMap served over HTTP by the JDK's own
// com.sun.net.httpserver (no framework). GET /get?key=N answers the value stored under N.
// Usage: java -Dsun.net.httpserver.nodelay=true LookupServer PORT ENTRIES [THREADS]   (without nodelay, small
// answers wait for the delayed ACK: 40 ms each)
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.util.HashMap;
import java.util.concurrent.Executors;

public final class LookupServer {
  public static void main(String[] args) throws IOException {
    int port = Integer.parseInt(args[0]);
    int entries = Integer.parseInt(args[1]);
    int threads = args.length > 2 ? Integer.parseInt(args[2]) : 2;
    HashMap<Long, byte[]> map = new HashMap<>(entries * 2);
    for (long i = 0; i < entries; i++) map.put(i, ("value-" + i + "-" + Long.toHexString(i * 0x9E3779B97F4A7C15L)).getBytes());
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 1024);
    server.createContext("/get", (HttpExchange exchange) -> {
      String query = exchange.getRequestURI().getRawQuery();
      long key = 0;
      if (query != null && query.startsWith("key=")) key = Long.parseLong(query.substring(4)) % entries;
      byte[] value = map.get(key);
      exchange.sendResponseHeaders(value != null ? 200 : 404, value != null ? value.length : -1);
      try (OutputStream body = exchange.getResponseBody()) {
        if (value != null) body.write(value);
      }
    });
    server.setExecutor(Executors.newFixedThreadPool(threads));
    server.start();
    System.out.println("ready " + entries);
  }
}
