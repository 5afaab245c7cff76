package command

import "testing"

func TestCanTransition(t *testing.T) {
	t.Parallel()
	allowed := map[[2]State]bool{
		{Pending, Sent}: true, {Pending, Expired}: true, {Pending, Cancelled}: true,
		{Sent, Acked}: true, {Sent, Succeeded}: true, {Sent, Failed}: true, {Sent, Pending}: true, {Sent, Expired}: true, {Sent, Cancelled}: true,
		{Acked, Succeeded}: true, {Acked, Failed}: true, {Acked, Expired}: true, {Acked, Cancelled}: true,
	}
	for _, from := range append(States, "bogus") {
		for _, to := range append(States, "bogus") {
			want := allowed[[2]State{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestFinal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s     State
		final bool
	}{
		{Pending, false}, {Sent, false}, {Acked, false},
		{Succeeded, true}, {Failed, true}, {Expired, true}, {Cancelled, true},
		{"bogus", false},
	} {
		if got := Final(tc.s); got != tc.final {
			t.Errorf("Final(%s) = %v, want %v", tc.s, got, tc.final)
		}
	}
}
