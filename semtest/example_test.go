package semtest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/semcontract"
	"github.com/atomicsem/atomicsem/semtest"
)

// newSemaphore is what a backend hands the suite: a semaphore with initial
// permits available and a ceiling of max, or the error its constructor
// returns, since the suite passes invalid arguments too and expects an
// error matching semcontract.ErrInvalidPermits for them. A backend puts
// its own constructor where atomicsem.New is; one whose calls take a
// context and return errors, as etcdsem's do, returns
// semtest.Remote(t, sem) instead of the semaphore itself.
func newSemaphore(t *testing.T, initial, max int64) (semtest.Semaphore, error) {
	s, err := atomicsem.New(initial, max)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// A backend runs the suite from a test of its own:
//
//	func TestConformance(t *testing.T) {
//		semtest.Run(t, newSemaphore, semtest.InBubble()) // InBubble: it can run in a synctest bubble
//	}
//
// Here the constructor is driven by hand, as the suite's first checks
// drive it: a semaphore that holds what it granted, and an error for
// arguments out of order.
func Example() {
	s, err := newSemaphore(nil, 2, 4)
	if err != nil {
		fmt.Println(err)
		return
	}
	tok, err := s.Acquire(context.Background(), 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%+v\n", s.Stats())
	tok.Release()

	_, err = newSemaphore(nil, 5, 4)
	fmt.Println("initial above max refused:", errors.Is(err, semcontract.ErrInvalidPermits))
	// Output:
	// {Available:1 Held:1 Limit:2 Max:4 Waiters:0 Closed:false}
	// initial above max refused: true
}
