package hello

import (
	"context"
	"fmt"
	"net/http"
	"unicode/utf8"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	hellov1 "github.com/better-compute/better-compute/examples/hello/gen/bettercompute/modules/hello/v1"
	"github.com/better-compute/better-compute/examples/hello/gen/bettercompute/modules/hello/v1/hellov1connect"
	"github.com/better-compute/better-compute/examples/hello/internal/hellodb"
	"github.com/better-compute/better-compute/gen/db"
	"github.com/better-compute/better-compute/module"
)

// listLimit bounds a list: a tenant's newest greetings.
const listLimit = 100

// server serves HelloService behind the API's guard: the guard has authenticated the caller and
// checked the method's permission before a handler runs.
type server struct {
	pool  *pgxpool.Pool
	admit *module.Admitter
}

var _ hellov1connect.HelloServiceHandler = (*server)(nil)

func service() module.Service {
	return module.Service{
		File: hellov1.File_bettercompute_modules_hello_v1_hello_proto,
		Mount: func(deps module.ServiceDeps, opts ...connect.HandlerOption) (string, http.Handler, error) {
			path, h := hellov1connect.NewHelloServiceHandler(&server{pool: deps.Pool, admit: deps.Admitter}, opts...)
			return path, h, nil
		},
	}
}

// CreateGreeting stores the greeting, audited and idempotent like the core's changes, and
// enqueues it for the reconciler in the same transaction, which wakes the reconciler once it
// commits.
func (s *server) CreateGreeting(ctx context.Context, req *hellov1.CreateGreetingRequest) (*hellov1.CreateGreetingResponse, error) {
	caller, ok := module.CallerOf(ctx)
	if !ok {
		return nil, fmt.Errorf("hello: no caller") // the guard authenticates every call first
	}
	if n := utf8.RuneCountInString(req.GetName()); n < 1 || n > 64 {
		return nil, module.InvalidArgument("name", "must be 1 to 64 characters, got %d", n)
	}
	return module.Admit(ctx, s.admit, req, func(ctx context.Context, tx *module.Tx) (*hellov1.CreateGreetingResponse, error) {
		g, err := hellodb.New(tx.DB()).CreateGreeting(ctx, hellodb.CreateGreetingParams{
			ID: uuid.Must(uuid.NewV7()), TenantID: caller.TenantID, Name: req.GetName(),
		})
		if err != nil {
			return nil, err
		}
		tx.Target("greeting", g.ID)
		if err := module.Enqueue(ctx, db.New(tx.DB()), Kind, g.ID.String()); err != nil {
			return nil, err
		}
		tx.Wake(Kind)
		return &hellov1.CreateGreetingResponse{Greeting: greeting(g)}, nil
	})
}

// ListGreetings lists the caller tenant's greetings.
func (s *server) ListGreetings(ctx context.Context, _ *hellov1.ListGreetingsRequest) (*hellov1.ListGreetingsResponse, error) {
	caller, ok := module.CallerOf(ctx)
	if !ok {
		return nil, fmt.Errorf("hello: no caller")
	}
	rows, err := hellodb.New(s.pool).ListGreetings(ctx, hellodb.ListGreetingsParams{TenantID: caller.TenantID, Lim: listLimit})
	if err != nil {
		return nil, err
	}
	res := &hellov1.ListGreetingsResponse{}
	for _, g := range rows {
		res.Greetings = append(res.Greetings, greeting(g))
	}
	return res, nil
}

func greeting(g hellodb.HelloGreeting) *hellov1.Greeting {
	return &hellov1.Greeting{Id: g.ID.String(), Name: g.Name, Message: g.Message, CreateTime: timestamppb.New(g.CreatedAt)}
}
