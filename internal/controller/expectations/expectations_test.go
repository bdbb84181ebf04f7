package expectations

import (
	"testing"
	"time"
)

func TestExpectations(t *testing.T) {
	now := time.Unix(0, 0)
	e := New(func() time.Time { return now })
	if !e.Satisfied("a") {
		t.Fatal("unknown key not satisfied")
	}
	e.Expect("a", 2, []string{"ns/p1"})
	e.Created("a")
	if e.Satisfied("a") {
		t.Fatal("satisfied with one creation and one deletion pending")
	}
	e.Created("a")
	e.Deleted("a", "ns/other")
	if e.Satisfied("a") {
		t.Fatal("satisfied with the deletion of p1 pending")
	}
	e.Deleted("a", "ns/p1")
	if !e.Satisfied("a") {
		t.Fatal("not satisfied once everything was seen")
	}
	e.Expect("b", 1, nil)
	now = now.Add(TTL + time.Second)
	if !e.Satisfied("b") {
		t.Fatal("expired expectations still hold")
	}
}
