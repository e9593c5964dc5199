package etcdsem_test

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"github.com/atomicsem/atomicsem/etcdsem"
)

// connect returns a client of the examples' etcd server and a session on
// it. The examples' server is the one the localetcd command runs (go run
// github.com/atomicsem/atomicsem/etcdsem/cmd/localetcd, then the endpoint
// http://127.0.0.1:2379), started in the test's process. In a real
// process the endpoints are the cluster's, and the session lives as long
// as the process.
func connect() (*clientv3.Client, *concurrency.Session) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{exampleEndpoint()},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		panic(err)
	}
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		panic(err)
	}
	return cli, session
}

// At most four reindex jobs at once across the fleet: every process opens
// the same semaphore, and each job holds a permit while it runs.
func Example() {
	cli, session := connect()
	defer cli.Close()
	defer session.Close() // ending the session gives back whatever it still holds

	ctx := context.Background()
	jobs, err := etcdsem.New(ctx, session, "/semaphores/reindex", 4, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := jobs.Acquire(ctx, 1)
	if err != nil {
		fmt.Println(err) // ctx.Err(), etcdsem.ErrClosed, etcdsem.ErrUnavailable, ...
		return
	}
	st, _ := jobs.Stats(ctx)
	fmt.Printf("running %d of %d jobs\n", st.Held, st.Limit)
	tok.Release()
	// Output:
	// running 1 of 4 jobs
}

// Throttle the whole fleet: one process lowers the limit, and every other
// process's acquirers wait until the jobs in flight finish. Nothing
// running is revoked.
func ExampleSemaphore_SetLimit() {
	ctx := context.Background()
	// Two processes of the fleet, each with a client and a session of its own.
	cliA, sessionA := connect()
	defer cliA.Close()
	defer sessionA.Close()
	cliB, sessionB := connect()
	defer cliB.Close()
	defer sessionB.Close()
	worker, _ := etcdsem.New(ctx, sessionA, "/semaphores/partner-api", 8, 16)
	operator, _ := etcdsem.New(ctx, sessionB, "/semaphores/partner-api", 8, 16)

	busy, _ := worker.Acquire(ctx, 6)
	_ = operator.SetLimit(ctx, 2) // the partner asks us to slow down
	st, _ := worker.Stats(ctx)
	fmt.Printf("limit %d, held %d, available %d\n", st.Limit, st.Held, st.Available)
	_, ok, _ := worker.TryAcquire(ctx, 1)
	fmt.Println("a new call may start:", ok)

	busy.Release()
	_ = operator.SetLimit(ctx, 16)
	st, _ = worker.Stats(ctx)
	fmt.Printf("limit %d, available %d\n", st.Limit, st.Available)
	// Output:
	// limit 2, held 6, available -4
	// a new call may start: false
	// limit 16, available 16
}

// A process that loses its session (its lease expired during a long pause,
// say) must stop using the permits it held: etcd has given them to others.
func ExampleSemaphore_Done() {
	cli, session := connect()
	defer cli.Close()
	ctx := context.Background()
	s, _ := etcdsem.New(ctx, session, "/semaphores/exports", 1, 1)
	_, _ = s.Acquire(ctx, 1) // its token is void once the session ends

	_ = session.Close() // as if the lease had expired
	<-s.Done()
	fmt.Println(s.Err())
	_, err := s.Acquire(ctx, 1)
	fmt.Println(err)
	// Output:
	// etcdsem: session lost; its tokens are void: its lease expired or its client was closed
	// etcdsem: session lost; its tokens are void: its lease expired or its client was closed
}

// Shut a fleet down gracefully: Close fails every waiter on every handle
// and refuses new work, and WaitIdle returns once the work in flight is
// done.
func ExampleSemaphore_WaitIdle() {
	cli, session := connect()
	defer cli.Close()
	defer session.Close()
	ctx := context.Background()
	s, _ := etcdsem.New(ctx, session, "/semaphores/uploads", 2, 2)
	inFlight, _ := s.Acquire(ctx, 2)

	waiter := make(chan error)
	go func() {
		_, err := s.Acquire(ctx, 1)
		waiter <- err
	}()
	for st, _ := s.Stats(ctx); st.Waiters == 0; st, _ = s.Stats(ctx) {
		time.Sleep(time.Millisecond)
	}

	_ = s.Close(ctx)
	fmt.Println("waiter:", <-waiter)
	released := make(chan struct{})
	go func() {
		defer close(released)
		time.Sleep(10 * time.Millisecond)
		inFlight.Release() // the last upload finishes
	}()
	fmt.Println("idle:", s.WaitIdle(ctx))
	<-released // WaitIdle may see the release before its round trip returns
	// Output:
	// waiter: etcdsem: semaphore is closed
	// idle: <nil>
}

// A job that writes its progress to etcd guards each write with its
// token's fence, so that a job whose permit was lost (its process paused,
// or its network broke, for longer than its lease) cannot overwrite the
// work of the job that got the permit next.
func ExampleSemaphore_AcquireFenced() {
	cli, session := connect()
	defer cli.Close()
	defer session.Close()

	ctx := context.Background()
	sem, err := etcdsem.New(ctx, session, "/semaphores/migration", 1, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, fence, err := sem.AcquireFenced(ctx, 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := cli.Txn(ctx).
		If(fence.IsHeld()).
		Then(clientv3.OpPut("/migration/progress", "step 1")).
		Commit()
	fmt.Println("written while holding:", err == nil && resp.Succeeded)
	tok.Release()

	resp, err = cli.Txn(ctx).
		If(fence.IsHeld()).
		Then(clientv3.OpPut("/migration/progress", "step 2")).
		Commit()
	fmt.Println("written after release:", err == nil && resp.Succeeded)
	<-fence.Done()
	// Output:
	// written while holding: true
	// written after release: false
}
