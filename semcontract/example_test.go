package semcontract_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/semcontract"
)

// A backend checks a request with the contract's rule, and callers match
// the refusal with errors.Is whichever semaphore returned it: atomicsem's
// sentinels are the contract's.
func ExampleCheckRequest() {
	const max = 10
	err := semcontract.CheckRequest(12, max, semcontract.ErrInvalidPermits, semcontract.ErrExceedsMax)
	fmt.Println(err)

	sem := atomicsem.MustNew(max, max)
	_, err = sem.Acquire(context.Background(), 12)
	fmt.Println(errors.Is(err, semcontract.ErrExceedsMax), errors.Is(err, atomicsem.ErrExceedsMax))
	// Output:
	// atomicsem: exceeds the semaphore's maximum: requested 12, max 10
	// true true
}
