package kuberuntime

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestCrashBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	b := newBackOff(clk, 10*time.Second, 40*time.Second)
	const key = "uid/app/hash"

	// First crash: restart at once, the delay becomes 10 s.
	crash := clk.Now()
	if waiting, _ := b.inBackOffSince(key, crash); waiting {
		t.Fatal("the first crash must not wait")
	}
	b.next(key, crash, "")
	steps := []struct {
		after time.Duration // from the crash to the sync
		wait  bool
		delay time.Duration
	}{
		{after: time.Second, wait: true, delay: 10 * time.Second},
		{after: 11 * time.Second, wait: false},
	}
	clk.Step(time.Second)
	for i, s := range steps {
		crash = clk.Now() // it crashed again right after its restart
		clk.Step(s.after)
		waiting, delay := b.inBackOffSince(key, crash)
		if waiting != s.wait || (s.wait && delay != s.delay) {
			t.Fatalf("step %d: waiting=%v delay=%v, want %v %v", i, waiting, delay, s.wait, s.delay)
		}
	}
	// Doubling up to the cap.
	for _, want := range []time.Duration{20 * time.Second, 40 * time.Second, 40 * time.Second} {
		if got := b.next(key, clk.Now(), ""); got != want {
			t.Fatalf("next delay = %v, want %v", got, want)
		}
	}
	// A container that ran longer than twice the cap starts over at 10 s.
	clk.Step(81 * time.Second)
	if waiting, _ := b.inBackOffSince(key, clk.Now()); waiting {
		t.Fatal("a container that ran for twice the cap must not wait")
	}
	if got := b.next(key, clk.Now(), ""); got != 10*time.Second {
		t.Fatalf("delay after a long run = %v, want 10s", got)
	}
	b.forget("uid/")
	if waiting, _ := b.inBackOffSince(key, clk.Now()); waiting {
		t.Fatal("a forgotten pod must not wait")
	}
}

func TestPullBackOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(10000, 0))
	b := newBackOff(clk, 10*time.Second, 300*time.Second)
	const key = "uid/image/x"
	if waiting, _ := b.inBackOffSinceUpdate(key); waiting {
		t.Fatal("nothing failed yet")
	}
	b.next(key, clk.Now(), "ErrImagePull: not found")
	clk.Step(9 * time.Second)
	waiting, last := b.inBackOffSinceUpdate(key)
	if !waiting || last != "ErrImagePull: not found" {
		t.Fatalf("9 s after a failed pull: waiting=%v last=%q", waiting, last)
	}
	clk.Step(time.Second)
	if waiting, _ := b.inBackOffSinceUpdate(key); waiting {
		t.Fatal("10 s after a failed pull the pull is retried")
	}
	b.next(key, clk.Now(), "again")
	clk.Step(19 * time.Second)
	if waiting, _ := b.inBackOffSinceUpdate(key); !waiting {
		t.Fatal("the second failure waits 20 s")
	}
	b.reset(key)
	if waiting, _ := b.inBackOffSinceUpdate(key); waiting {
		t.Fatal("a successful pull clears the back-off")
	}
}
