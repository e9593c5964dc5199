package rediscredit_test

import (
	"context"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// example is the redis-server the examples use, started by the first of
// them (an example has no testing.T to start one of its own) and stopped
// by TestMain. Each example starts on an empty server, so that it prints
// the same however often it runs.
var example struct {
	once sync.Once
	srv  *server
	err  error
}

// exampleAddr returns the address of the examples' server, emptied. In a
// program of one's own it is the address of one's Redis.
func exampleAddr() string {
	example.once.Do(func() {
		bin, err := serverBinary()
		if err == nil {
			example.srv, err = startServer(bin, 0)
		}
		example.err = err
	})
	if example.err != nil {
		panic(example.err) // TestMain skips the examples without a server
	}
	c := redis.NewClient(&redis.Options{Addr: example.srv.addr()})
	defer c.Close()
	if err := c.FlushAll(context.Background()).Err(); err != nil {
		panic(err)
	}
	return example.srv.addr()
}

// exampleDownAddr returns a loopback address that nothing listens on: a
// Redis that cannot be reached.
func exampleDownAddr() string {
	port, err := freePort()
	if err != nil {
		panic(err)
	}
	return "127.0.0.1:" + strconv.Itoa(port)
}
