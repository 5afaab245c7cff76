package commands_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"

	"github.com/better-compute/better-compute/gen/db"
	commandsv1 "github.com/better-compute/better-compute/gen/go/bettercompute/commands/v1"
	worker "github.com/better-compute/better-compute/internal/command"
	"github.com/better-compute/better-compute/internal/dbtest"
	"github.com/better-compute/better-compute/internal/guard"
	"github.com/better-compute/better-compute/internal/quota"
	"github.com/better-compute/better-compute/server"
	"github.com/better-compute/better-compute/server/servertest"
)

// TestConcurrentCreatesNeverPassTheCommandsCap races commands/create at a tenant with room for
// a few commands this minute, some of it taken already: exactly the room is created, every
// refusal says when to retry, and the reservations equal the commands. Commands a worker makes
// (command.Create, as workflows and node control do) are not the tenant's calls and do not count.
func TestConcurrentCreatesNeverPassTheCommandsCap(t *testing.T) {
	t.Parallel()
	const limit, before, racers = 8, 2, 20
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{Tenant: quota.Limits{CommandsPerMinute: limit}}
	})
	tenant := tenantOf(t, env, env.AdminKey)
	n := node(t, env, tenant)
	c := client(env, env.AdminKey)
	for i := range before {
		if _, err := c.Create(ctx, &commandsv1.CreateRequest{
			NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: fmt.Sprintf("before-%d", i),
		}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := worker.Create(ctx, db.New(env.Pool), tenant, n, "echo", "worker", []byte(`{}`), time.Minute); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	codes := map[connect.Code]int{}
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			_, err := c.Create(ctx, &commandsv1.CreateRequest{
				NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: fmt.Sprintf("racer-%d", i),
			})
			var cerr *connect.Error
			switch {
			case err == nil:
			case connect.CodeOf(err) != connect.CodeResourceExhausted:
				t.Errorf("create: %v", err)
			case !errors.As(err, &cerr):
				t.Errorf("not a Connect error: %v", err)
			default:
				if s, perr := strconv.Atoi(cerr.Meta().Get(guard.RetryAfterHeader)); perr != nil || s < 1 || s > 60 {
					t.Errorf("Retry-After %q, want 1 to 60 seconds", cerr.Meta().Get(guard.RetryAfterHeader))
				}
			}
			mu.Lock()
			codes[connect.CodeOf(err)]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if ok := racers - codes[connect.CodeResourceExhausted]; ok != limit-before {
		t.Errorf("%d concurrent creates succeeded (codes %v), want %d", ok, codes, limit-before)
	}
	var commands, counted int
	if err := env.Pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM commands WHERE tenant_id = $1),
		       (SELECT COALESCE(sum(commands), 0) FROM tenant_command_seconds WHERE tenant_id = $1)`, tenant).Scan(&commands, &counted); err != nil {
		t.Fatal(err)
	}
	if commands != limit+1 || counted != limit {
		t.Errorf("%d commands (the worker's included), %d reserved, want %d and %d", commands, counted, limit+1, limit)
	}
	_, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}, IdempotencyKey: uuid.NewString()})
	wantCode(t, err, connect.CodeResourceExhausted)
}

// TestCommandsWindowSlides: the cap counts the commands of the last minute only, Retry-After
// says when the oldest of them leaves it, and a tenant's seconds long gone are pruned by its
// next command.
func TestCommandsWindowSlides(t *testing.T) {
	t.Parallel()
	env := servertest.Start(t, dbtest.Pool(t), func(o *server.Options) {
		o.RateLimits = guard.RateLimits{Tenant: quota.Limits{CommandsPerMinute: 5}}
	})
	tenant := tenantOf(t, env, env.AdminKey)
	n := node(t, env, tenant)
	// Four commands 50 seconds ago leave room for one; a hundred five minutes ago count no more.
	if _, err := env.Pool.Exec(ctx, `INSERT INTO tenant_command_seconds (tenant_id, second, commands)
		VALUES ($1, date_trunc('second', now()) - interval '50 seconds', 4),
		       ($1, date_trunc('second', now()) - interval '5 minutes', 100)`, tenant); err != nil {
		t.Fatal(err)
	}
	c := client(env, env.AdminKey)
	if _, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}}); err != nil {
		t.Fatalf("create with room for one: %v", err)
	}
	var old int
	if err := env.Pool.QueryRow(ctx, `SELECT count(*) FROM tenant_command_seconds WHERE tenant_id = $1 AND second < now() - interval '2 minutes'`, tenant).Scan(&old); err != nil || old != 0 {
		t.Errorf("%d seconds long gone left (%v), want them pruned", old, err)
	}
	_, err := c.Create(ctx, &commandsv1.CreateRequest{NodeId: n.String(), Payload: &commandsv1.CreateRequest_Echo{Echo: echo}})
	var cerr *connect.Error
	if !errors.As(err, &cerr) || cerr.Code() != connect.CodeResourceExhausted {
		t.Fatalf("create in a full minute: %v, want resource_exhausted", err)
	}
	if s, err := strconv.Atoi(cerr.Meta().Get(guard.RetryAfterHeader)); err != nil || s < 9 || s > 11 {
		t.Errorf("Retry-After %q, want about 10 seconds", cerr.Meta().Get(guard.RetryAfterHeader))
	}
}
