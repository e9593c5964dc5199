package token_test

import (
	"context"
	"fmt"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
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

// Store and pass tokens by pointer: take a token's address where the acquire
// returned it, and keep the *Token in slices, maps and channels. A Token
// value copied into one (append(held, tok), held[k] = tok, ch <- tok, or
// ranging over a []Token) is a copy, and both copies could be ended; go
// vet reports all of these but the channel send. A *Token is never
// copied.
func Example_pointers() {
	sem := atomicsem.MustNew(3, 3)
	ctx := context.Background()

	byJob := make(map[string]*token.Token)
	var held []*token.Token
	for _, job := range []string{"a", "b", "c"} {
		tok, err := sem.Acquire(ctx, 1)
		if err != nil {
			panic(err)
		}
		byJob[job] = &tok // one token per loop iteration (Go 1.22)
		held = append(held, &tok)
	}

	done := make(chan *token.Token, 1)
	go func() { done <- byJob["b"] }()
	(<-done).Release() // job b ends wherever its token is sent
	fmt.Println(sem.Stats().Held)

	for _, tok := range held {
		if tok.Permits() > 0 { // b's is spent already
			tok.Release()
		}
	}
	fmt.Println(sem.Stats().Held)
	// Output:
	// 2
	// 0
}
