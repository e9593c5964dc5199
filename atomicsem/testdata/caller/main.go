// Command caller ends the tokens atomicsem hands out the way most callers
// do: it imports atomicsem alone and never names token.Token. The test
// TestInliningFactsTheCommentsRelyOn builds it with -gcflags=-m to check
// that the token's Release and Forget are inlined into it all the same.
package main

import "github.com/atomicsem/atomicsem/atomicsem"

func main() {
	s := atomicsem.MustNew(1, 1)
	if tok, ok := s.TryAcquire(1); ok {
		tok.Release()
	}
	if tok, ok := s.TryAcquire(1); ok {
		tok.Forget()
	}
}
