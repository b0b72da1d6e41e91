// goprog: the Go workload of the pprof source tests (tests/unit/agent/test_sampler_pprof.c,
// tests/integration/test_pprof_go.py). Standard library only; built by the tests with a
// private GOPATH/GOCACHE and no network.
//
// It serves net/http/pprof on 127.0.0.1 (port 0: the kernel picks one), prints "PORT <n>" on
// stdout once listening, spins burnCPU (the hot function, labelled worker=burner through
// pprof.Do), keeps some memory alive from allocLive (for heap profiles), and exits when stdin
// closes or after -lifetime.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"runtime"
	"runtime/pprof"
	"time"
)

var sink uint64
var live [][]byte

//go:noinline
func burnCPU(n int) uint64 {
	x := uint64(1)
	for i := 0; i < n; i++ {
		x = x*6364136223846793005 + 1442695040888963407
		x ^= x >> 29
	}
	return x
}

//go:noinline
func allocLive() {
	for i := 0; i < 64; i++ {
		live = append(live, make([]byte, 64<<10))
	}
}

func main() {
	lifetime := flag.Duration("lifetime", 120*time.Second, "exit after this long")
	flag.Parse()
	allocLive()
	// Heap profiles describe the heap as of the last completed GC: run one so the live
	// allocations above are in every heap profile from the start.
	runtime.GC()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	go func() {
		pprof.Do(context.Background(), pprof.Labels("worker", "burner"), func(context.Context) {
			for {
				sink += burnCPU(1 << 20)
			}
		})
	}()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	go func() {
		time.Sleep(*lifetime)
		os.Exit(0)
	}()
	fmt.Printf("PORT %d\n", ln.Addr().(*net.TCPAddr).Port)
	os.Stdout.Sync()
	http.Serve(ln, nil)
}
