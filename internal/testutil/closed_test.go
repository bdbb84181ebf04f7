package testutil

import "testing"

func TestClosedHoldsOnceTheChannelIsClosed(t *testing.T) {
	ch := make(chan struct{})
	ready := Closed(ch)
	if ready() {
		t.Fatal("Closed held before the channel was closed")
	}
	close(ch)
	if !ready() {
		t.Fatal("Closed does not hold after the channel was closed")
	}
}
