// SPDX-License-Identifier: MIT
// map_lookup.go - the Go runtime's own heap: a map[uint64]uint64 of N entries, then M random lookups, timed.
// After the map is built it prints "ready PID" and waits for a line on stdin, so that `hugify collapse PID` or
// the agent can act on its heap before the timed lookups (bench/runtimes/go_collapse.sh; docs/runtimes.md, Go).
// Prints "build_seconds", "lookup_seconds" and a checksum.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"
)

// splitmix64: the same keys in every run, no allocation per key.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func main() {
	entries := flag.Uint64("entries", 20_000_000, "map entries")
	lookups := flag.Uint64("lookups", 20_000_000, "random lookups")
	wait := flag.Bool("wait", false, "print \"ready PID\" and wait for a line on stdin before the lookups")
	flag.Parse()

	start := time.Now()
	m := make(map[uint64]uint64)
	for i := uint64(0); i < *entries; i++ {
		m[mix(i)] = i
	}
	fmt.Printf("build_seconds %.3f\n", time.Since(start).Seconds())
	if *wait {
		fmt.Printf("ready %d\n", os.Getpid())
		bufio.NewReader(os.Stdin).ReadString('\n')
	}
	start = time.Now()
	var sum uint64
	x := uint64(12345)
	for i := uint64(0); i < *lookups; i++ {
		x = mix(x)
		sum += m[mix(x%*entries)]
	}
	fmt.Printf("lookup_seconds %.3f\n", time.Since(start).Seconds())
	fmt.Printf("checksum %d\n", sum)
}
