// Command localetcd runs an etcd server on loopback, in one process, for
// trying etcdsem without an etcd cluster:
//
//	go run github.com/atomicsem/atomicsem/etcdsem/cmd/localetcd
//
// serves clients on http://127.0.0.1:2379 until it is interrupted, with
// its data in a temporary directory that it removes when it stops. It is
// one member with fsync off: a place to try things, not to keep data.
//
// Flags:
//
//	-addr host:port   where clients connect (a loopback address; default 127.0.0.1:2379)
//	-data dir         keep the data in dir, and leave it there at exit
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/atomicsem/atomicsem/etcdsem/internal/localetcd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localetcd:", err)
		os.Exit(1)
	}
}

// run serves until ctx is done, saying where on out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("localetcd", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:2379", "where clients connect (a loopback address)")
	dir := fs.String("data", "", "keep the data in this directory, and leave it there at exit (default: a temporary directory, removed at exit)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv, err := localetcd.Start(*addr, *dir)
	if err != nil {
		return err
	}
	defer srv.Close()
	fmt.Fprintf(out, "etcd serving clients on %s; stop it with Ctrl-C\n", srv.Endpoint)
	<-ctx.Done()
	fmt.Fprintln(out, "stopping")
	return nil
}
