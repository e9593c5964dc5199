// Command vetcopies copies a token in every way Token's doc names, each
// line marked with what go vet's copylocks check says of it ("reported"
// or "silent"); TestVetReportsCopiesAsTheDocSays holds the doc to what vet
// does.
package main

import (
	"context"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

var sem = atomicsem.MustNew(8, 8)

func byValue(token.Token) {} // vet: reported (a parameter by value)

func byPointer(*token.Token) {}

func wrap(ctx context.Context) (token.Token, error) {
	return sem.Acquire(ctx, 1) // vet: silent (an acquire's result, handed on)
}

func wrapVar(ctx context.Context) (token.Token, error) {
	tok, err := sem.Acquire(ctx, 1)
	return tok, err // vet: reported (a variable returned by value)
}

func main() {
	ctx := context.Background()
	tok, _ := wrap(ctx)             // vet: silent
	a := tok                        // vet: reported (an assignment)
	s := []token.Token{tok}         // vet: reported (a composite literal)
	s = append(s, tok)              // vet: reported (append)
	m := map[string]token.Token{}   // vet: silent
	m["k"] = tok                    // vet: reported (a map store)
	ch := make(chan token.Token, 1) // vet: silent
	ch <- tok                       // vet: silent (a channel send)
	byValue(tok)                    // vet: reported (a call)
	for _, t := range s {           // vet: reported (a range variable)
		_ = t.Permits() // vet: silent
	}
	p := &tok                         // vet: silent
	byPointer(p)                      // vet: silent
	b := *p                           // vet: reported (a dereference)
	ps := []*token.Token{&a, &b}      // vet: silent (pointers)
	pch := make(chan *token.Token, 1) // vet: silent
	pch <- p                          // vet: silent
	_, _ = ps, wrapVar
}
