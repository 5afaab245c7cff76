package gateway

import (
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestLivenessWritesOnlyChanges: heartbeats write nothing; a daemon silent for staleAfter loses
// the vouch, gets it back when heard again, and a session's end ends it once; a newer session
// of the node is not ended by the older one's end; changes not written come back.
func TestLivenessWritesOnlyChanges(t *testing.T) {
	t.Parallel()
	l := newLiveness()
	a, b := uuid.New(), uuid.New()
	t0 := time.Now()
	const stale = 20 * time.Second
	l.start(a, "s1", t0)
	l.start(b, "s2", t0)
	for i := range 10 {
		at := t0.Add(time.Duration(i) * 5 * time.Second)
		l.beat(a, "s1", at)
		l.beat(b, "s2", at)
		if cs := l.changes(at, stale); len(cs) != 0 {
			t.Fatalf("heartbeats wrote %v", cs)
		}
	}
	last := t0.Add(45 * time.Second)
	l.beat(a, "s1", last.Add(10*time.Second))
	// b's daemon went silent after 45 s; 21 s later the gateway stops vouching for it.
	cs := l.changes(last.Add(stale+time.Second), stale)
	if len(cs) != 1 || cs[0].node != b || cs[0].vouch || !cs[0].seen.Equal(last) {
		t.Fatalf("changes %+v, want b's vouch ended as of its last heartbeat", cs)
	}
	// Not written: given back, and written next round.
	l.undo(cs)
	if again := l.changes(last.Add(stale+2*time.Second), stale); len(again) != 1 || again[0].node != b || again[0].vouch {
		t.Fatalf("after undo: %+v", again)
	}
	// b heard from again: vouched again.
	l.beat(a, "s1", last.Add(30*time.Second))
	l.beat(b, "s2", last.Add(30*time.Second))
	if cs := l.changes(last.Add(31*time.Second), stale); len(cs) != 1 || cs[0].node != b || !cs[0].vouch {
		t.Fatalf("changes %+v, want b vouched again", cs)
	}
	// a's session is replaced by a newer one: the old one's end changes nothing.
	l.start(a, "s3", last.Add(31*time.Second))
	l.stop(a, "s1")
	l.beat(a, "s1", last.Add(40*time.Second)) // a late heartbeat of the old session
	if cs := l.changes(last.Add(32*time.Second), stale); len(cs) != 0 {
		t.Fatalf("the old session's end wrote %+v", cs)
	}
	// The newer session ends: its vouch ends once, as of its last heartbeat.
	l.stop(a, "s3")
	cs = l.changes(last.Add(33*time.Second), stale)
	if len(cs) != 1 || cs[0].node != a || cs[0].vouch || !cs[0].ended || !cs[0].seen.Equal(last.Add(31*time.Second)) {
		t.Fatalf("changes %+v, want a's vouch ended", cs)
	}
	if cs := l.changes(last.Add(34*time.Second), stale); len(cs) != 0 {
		t.Fatalf("ended twice: %+v", cs)
	}
}
