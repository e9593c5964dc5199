package token_test

import (
	"fmt"

	"github.com/atomicsem/atomicsem/atomicsem"
)

// Reserve, then settle: take what a job might need, and when it is done,
// spend what it used and give back the rest.
func ExampleToken_Split() {
	budget := atomicsem.MustNew(10, 10)

	reserved, _ := budget.TryAcquire(10)
	used := int64(3) // known once the job has run

	spent, _ := reserved.Split(used)
	spent.Forget()     // used up: the limit drops by 3
	reserved.Release() // the 7 unused go back
	fmt.Printf("%+v\n", budget.Stats())
	// Output:
	// {Available:7 Held:0 Limit:7 Max:10 Waiters:0 Closed:false}
}
