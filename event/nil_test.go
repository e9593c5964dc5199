package event_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/atomicsem/atomicsem/event"
)

// TestNilArgumentsPanicWithThePackagePrefix calls every method of both
// events on a nil receiver, and Wait with a nil context, and requires a
// panic in the package's voice that names the method.
func TestNilArgumentsPanicWithThePackagePrefix(t *testing.T) {
	var nilAuto *event.AutoReset
	var nilManual *event.ManualReset
	var auto event.AutoReset
	var manual event.ManualReset
	var nilCtx context.Context //nolint:staticcheck // the nil under test
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"AutoReset.Set", func() { nilAuto.Set() }, "AutoReset.Set called on a nil event"},
		{"AutoReset.Reset", func() { nilAuto.Reset() }, "AutoReset.Reset called on a nil event"},
		{"AutoReset.TryWait", func() { nilAuto.TryWait() }, "AutoReset.TryWait called on a nil event"},
		{"AutoReset.Wait", func() { _ = nilAuto.Wait(context.Background()) }, "AutoReset.Wait called on a nil event"},
		{"AutoReset.C", func() { _ = nilAuto.C() }, "AutoReset.C called on a nil event"},
		{"AutoReset.Wait(nil ctx)", func() { _ = auto.Wait(nilCtx) }, "AutoReset.Wait called with a nil Context"},
		{"ManualReset.Set", func() { nilManual.Set() }, "ManualReset.Set called on a nil event"},
		{"ManualReset.Reset", func() { nilManual.Reset() }, "ManualReset.Reset called on a nil event"},
		{"ManualReset.IsSet", func() { nilManual.IsSet() }, "ManualReset.IsSet called on a nil event"},
		{"ManualReset.Wait", func() { _ = nilManual.Wait(context.Background()) }, "ManualReset.Wait called on a nil event"},
		{"ManualReset.Done", func() { _ = nilManual.Done() }, "ManualReset.Done called on a nil event"},
		{"ManualReset.Wait(nil ctx)", func() { _ = manual.Wait(nilCtx) }, "ManualReset.Wait called with a nil Context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msg string
			func() {
				defer func() { msg = fmt.Sprint(recover()) }()
				tt.call()
			}()
			require.True(t, strings.HasPrefix(msg, "event: "), "got %q", msg)
			require.Contains(t, msg, tt.want)
		})
	}
	require.False(t, auto.TryWait(), "a refused Wait changed the event")
	require.False(t, manual.IsSet(), "a refused Wait changed the event")
}
