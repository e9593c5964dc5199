// Command stalecopy ends a copy of a token after the original, on the
// atomicsem fast path and on a bare owner. Built with -race, the token
// package's tracking must refuse the copy's end with a "token: " panic
// before the permits reach the semaphore; TestRaceBuildCatchesAStaleCopy
// checks that it does.
package main

import (
	"fmt"
	"reflect"

	"github.com/atomicsem/atomicsem/atomicsem"
	"github.com/atomicsem/atomicsem/token"
)

func main() {
	sem := atomicsem.MustNew(2, 2)
	tok, _ := sem.TryAcquire(1)
	other, _ := sem.TryAcquire(1)
	dup := new(token.Token)
	reflect.ValueOf(dup).Elem().Set(reflect.ValueOf(&tok).Elem()) // a copy vet does not see
	tok.Release()
	func() {
		defer func() { fmt.Println("panic:", recover()) }()
		dup.Release()
	}()
	fmt.Println("held:", sem.Stats().Held)
	other.Release()
}
