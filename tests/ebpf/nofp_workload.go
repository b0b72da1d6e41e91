// nofp_workload.go — the Go workload of tests/ebpf/test_unwind.c, built there with
// -ldflags="-s -w" (no symbol table, no DWARF: how Go services usually ship). hotLeaf keeps
// no frame (Go saves no frame pointer in a leaf without one), so a frame-pointer walk from it
// skips its caller chainB; the tables built from the Go runtime's own pcsp data do not.
//
//	nofp_workload_go SECONDS
package main

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

var sink int

//go:noinline
func hotLeaf(n int) int {
	s := 0
	for i := 0; i < n; i++ {
		s += i * 7
	}
	return s
}

//go:noinline
func chainB(n int) int { return hotLeaf(n) + 1 }

//go:noinline
func chainA(n int) int { return chainB(n) + 2 }

func main() {
	secs := 5.0
	if len(os.Args) > 1 {
		if v, err := strconv.ParseFloat(os.Args[1], 64); err == nil {
			secs = v
		}
	}
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	fmt.Println("ready")
	for time.Now().Before(end) {
		for k := 0; k < 100; k++ {
			sink += chainA(20000)
		}
	}
	fmt.Println("iterations", sink)
}
