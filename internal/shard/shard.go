// Package shard spreads a role's work over its live workers.
//
// Work of a role is divided into Count shards. Every worker of the role is a member: it
// heartbeats in shard_members and, among the members heard from within a TTL, takes the shards
// that rendezvous hashing assigns to it, each under the lock "shard:<role>:<n>". When a member
// dies its heartbeat and locks expire and the survivors take its shards within a TTL; when one
// joins, the others release the shards it now wins and it takes them once they are free, so no
// shard ever has two holders.
package shard

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/internal/locks"
)

// Count is the number of shards of every role.
const Count = 256

// DefaultTTL bounds how long a dead member's shards stay unserved.
const DefaultTTL = 10 * time.Second

// Member is one worker's membership in a role.
type Member struct {
	role   string
	holder *locks.Holder
	pool   *pgxpool.Pool
	ttl    time.Duration
	log    *slog.Logger

	mu      sync.Mutex
	owned   map[int]locks.Lock
	changed chan struct{} // closed and replaced whenever owned changes
}

// NewMember returns a member of role for holder. ttl 0 means DefaultTTL.
func NewMember(pool *pgxpool.Pool, holder *locks.Holder, role string, ttl time.Duration, log *slog.Logger) *Member {
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Member{
		role: role, holder: holder, pool: pool, ttl: ttl,
		log:   log.With("role", role, "member", holder.ID),
		owned: map[int]locks.Lock{}, changed: make(chan struct{}),
	}
}

// Owned returns the shards the member holds now, sorted.
func (m *Member) Owned() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.owned))
	for s := range m.owned {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Lock returns the lock of a shard the member holds, for fenced writes.
func (m *Member) Lock(shard int) (locks.Lock, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.owned[shard]
	return l, ok
}

// Changed returns a channel that is closed the next time the owned shards change.
func (m *Member) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Run keeps the membership until ctx ends, then releases the shards and leaves (unless the
// holder was abandoned, as in a crash).
func (m *Member) Run(ctx context.Context) {
	lastConfirmed := time.Now()
	for {
		if err := m.tick(ctx); err != nil {
			if ctx.Err() != nil {
				m.leave()
				return
			}
			m.log.Warn("shard membership round failed", "err", err)
			// Unconfirmed for most of a TTL: let the shards go rather than risk two holders.
			if time.Since(lastConfirmed) > m.ttl*2/3 {
				m.set(map[int]locks.Lock{})
			}
		} else {
			lastConfirmed = time.Now()
		}
		select {
		case <-ctx.Done():
			m.leave()
			return
		case <-time.After(m.ttl / 3):
		}
	}
}

// tick heartbeats, works out the shards this member should hold, and renews, releases and
// acquires locks to match.
func (m *Member) tick(ctx context.Context) error {
	q := db.New(m.pool)
	if err := q.HeartbeatMember(ctx, db.HeartbeatMemberParams{Role: m.role, Member: m.holder.ID}); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	members, err := q.LiveMembers(ctx, db.LiveMembersParams{Role: m.role, TtlMs: m.ttl.Milliseconds()})
	if err != nil {
		return fmt.Errorf("list members: %w", err)
	}
	if !slices.Contains(members, m.holder.ID) {
		members = append(members, m.holder.ID)
	}
	want := map[int]bool{}
	for s := range Count {
		if Assign(s, members) == m.holder.ID {
			want[s] = true
		}
	}
	current := m.snapshot()
	next := map[int]locks.Lock{}
	if len(current) > 0 {
		renewed, err := m.holder.Renew(ctx, m.ttl, m.names(slices.Collect(maps.Keys(current)))...)
		if err != nil {
			return err
		}
		for _, l := range renewed {
			next[m.shardOf(l.Name)] = l
		}
	}
	var release []int
	for s := range next {
		if !want[s] {
			release = append(release, s)
			delete(next, s)
		}
	}
	if err := m.holder.Release(ctx, m.names(release)...); err != nil {
		return err
	}
	var acquire []int
	for s := range want {
		if _, ok := next[s]; !ok {
			acquire = append(acquire, s)
		}
	}
	if len(acquire) > 0 {
		got, err := m.holder.Acquire(ctx, m.ttl, m.names(acquire)...)
		if err != nil {
			return err
		}
		for _, l := range got {
			next[m.shardOf(l.Name)] = l
		}
	}
	m.set(next)
	if err := q.PruneMembers(ctx, db.PruneMembersParams{Role: m.role, OlderThanMs: 10 * m.ttl.Milliseconds()}); err != nil {
		return fmt.Errorf("prune members: %w", err)
	}
	return nil
}

func (m *Member) leave() {
	m.set(map[int]locks.Lock{})
	if m.holder.Abandoned() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	all := make([]int, Count)
	for i := range all {
		all[i] = i
	}
	if err := m.holder.Release(ctx, m.names(all)...); err != nil {
		m.log.Warn("release shards", "err", err)
	}
	if err := db.New(m.pool).LeaveMembership(ctx, db.LeaveMembershipParams{Role: m.role, Member: m.holder.ID}); err != nil {
		m.log.Warn("leave membership", "err", err)
	}
}

func (m *Member) snapshot() map[int]locks.Lock {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.owned)
}

func (m *Member) set(owned map[int]locks.Lock) {
	m.mu.Lock()
	defer m.mu.Unlock()
	same := len(owned) == len(m.owned)
	for s, l := range owned {
		if old, ok := m.owned[s]; !ok || old.Token != l.Token {
			same = false
		}
	}
	m.owned = owned
	if !same {
		m.log.Debug("shards changed", "count", len(owned))
		close(m.changed)
		m.changed = make(chan struct{})
	}
}

// LockName is the name of the lock of one shard of a role.
func LockName(role string, shard int) string { return fmt.Sprintf("shard:%s:%03d", role, shard) }

func (m *Member) names(shards []int) []string {
	out := make([]string, len(shards))
	for i, s := range shards {
		out[i] = LockName(m.role, s)
	}
	return out
}

func (m *Member) shardOf(name string) int {
	var s int
	_, _ = fmt.Sscanf(name[len(name)-3:], "%03d", &s)
	return s
}

// Assign is the rendezvous (highest random weight) choice of a shard's member: every member
// computes the same answer from the same member list, and a member joining or leaving moves
// only the shards it wins or held.
func Assign(shard int, members []string) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s/%d", m, shard)
		// fnv mixes trailing bytes weakly; finish with a 64-bit mixer (SplitMix64).
		score := mix(h.Sum64())
		if best == "" || score > bestScore || (score == bestScore && m < best) {
			best, bestScore = m, score
		}
	}
	return best
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ (x >> 31)
}
