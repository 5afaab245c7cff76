package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
	gatewayv1 "github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/gateway/v1/gatewayv1connect"
)

// PokeWindow is how long the Notifier gathers the nodes of committed commands before it pokes
// their gateways: the commits of a few milliseconds cost one query and one poke per gateway,
// instead of one each per create call, at the price of that much dispatch latency.
const PokeWindow = 2 * time.Millisecond

// notifyTimeout bounds a round of notification: its query and its requests.
const notifyTimeout = 5 * time.Second

// Notifier is the API's side of the control API: after a commit it pokes the gateways that hold
// the affected nodes' sessions, with the generated GatewayControlService client
// (proto/bettercompute/gateway/v1/control.proto). Every call is best effort and returns at once.
//
// Pokes are batched: CommandsCreated adds the nodes to a set, and one flusher at a time, started
// by the first addition, waits PokeWindow, takes the set, finds its gateways in one query and
// sends each gateway one Poke (one per maxControlNodes nodes, the most a call may name);
// additions meanwhile wait for the next round. So at most one
// poke round is in flight, whatever the create rate, and it holds at most one connection of the
// Notifier's pool.
type Notifier struct {
	pool   *pgxpool.Pool
	client *http.Client
	log    *slog.Logger
	wg     sync.WaitGroup

	mu       sync.Mutex
	due      []uuid.UUID // nodes to poke for at the next round
	flushing bool        // a flusher runs and will take due
}

// NewNotifier returns a notifier with a client certificate from the internal CA. pool is only
// used to find the gateways to notify: give it a pool of its own (process does) so the pokes
// never queue behind the requests whose commits they follow.
func NewNotifier(pool *pgxpool.Pool, ia InternalAuthority, log *slog.Logger) (*Notifier, error) {
	cert, err := internalCertificate(ia, "api", "")
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, RootCAs: ia.InternalCAPool()},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 4,
	}
	return &Notifier{pool: pool, client: &http.Client{Transport: tr, Timeout: 2 * time.Second}, log: log}, nil
}

// CommandsCreated pokes the gateways of the nodes to dispatch, within PokeWindow.
func (n *Notifier) CommandsCreated(_ context.Context, nodeIDs []uuid.UUID) {
	if len(nodeIDs) == 0 {
		return
	}
	n.mu.Lock()
	n.due = append(n.due, nodeIDs...)
	start := !n.flushing
	n.flushing = true
	n.mu.Unlock()
	if start {
		n.wg.Go(n.flushPokes)
	}
}

// flushPokes pokes for the due nodes, round after round, until a round finds none.
func (n *Notifier) flushPokes() {
	timer := time.NewTimer(PokeWindow)
	defer timer.Stop()
	for {
		<-timer.C
		n.mu.Lock()
		due := n.due
		n.due = nil
		if len(due) == 0 {
			n.flushing = false
			n.mu.Unlock()
			return
		}
		n.mu.Unlock()
		slices.SortFunc(due, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		n.pokeGateways(slices.Compact(due))
		timer.Reset(PokeWindow)
	}
}

// pokeGateways finds the gateways holding the nodes' sessions and pokes each once.
func (n *Notifier) pokeGateways(nodeIDs []uuid.UUID) {
	ctx, cancel := context.WithTimeout(context.Background(), notifyTimeout)
	defer cancel()
	rows, err := db.New(n.pool).SessionGateways(ctx, nodeIDs)
	if err != nil {
		n.log.Warn("find gateways to notify", "err", err)
		return
	}
	targets := map[string][]uuid.UUID{}
	for _, r := range rows {
		targets[r.ControlUrl] = append(targets[r.ControlUrl], r.NodeID)
	}
	for url, ids := range targets {
		client := n.control(url)
		for chunk := range slices.Chunk(ids, maxControlNodes) {
			_, err := client.Poke(ctx, &gatewayv1.PokeRequest{NodeIds: idStrings(chunk)})
			n.logFailure(url, "poke", err)
		}
	}
}

// FanOutCreated pokes, once each, the gateways that hold a session of one of the fan-out's
// nodes, naming the fan-out rather than its nodes (the gateway claims the fan-out's commands for
// all its sessions in one statement). Fan-outs are few, so they are not batched; one query
// finds the gateways however many nodes the fan-out reaches.
func (n *Notifier) FanOutCreated(ctx context.Context, fanOutID uuid.UUID) {
	ctx = context.WithoutCancel(ctx)
	n.wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		defer cancel()
		urls, err := db.New(n.pool).FanOutGateways(ctx, fanOutID)
		if err != nil {
			n.log.Warn("find gateways to notify of a fan-out", "fan_out_id", fanOutID, "err", err)
			return
		}
		for _, url := range urls {
			_, err := n.control(url).Poke(ctx, &gatewayv1.PokeRequest{FanOutIds: []string{fanOutID.String()}})
			n.logFailure(url, "poke", err)
		}
	})
}

// NodesRevoked tells every live gateway to end the nodes' sessions now. Revocations are rare
// and urgent, so they are not batched.
func (n *Notifier) NodesRevoked(ctx context.Context, nodeIDs []uuid.UUID) {
	if len(nodeIDs) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	n.wg.Go(func() {
		ctx, cancel := context.WithTimeout(ctx, notifyTimeout)
		defer cancel()
		gws, err := db.New(n.pool).LiveGateways(ctx)
		if err != nil {
			n.log.Warn("find gateways to notify", "err", err)
			return
		}
		chunks := slices.Collect(slices.Chunk(idStrings(nodeIDs), maxControlNodes))
		for _, gw := range gws {
			if gw.ControlUrl == "" {
				continue
			}
			client := n.control(gw.ControlUrl)
			for _, chunk := range chunks {
				_, err := client.Revoke(ctx, &gatewayv1.RevokeRequest{NodeIds: chunk})
				n.logFailure(gw.ControlUrl, "revoke", err)
			}
		}
	})
}

// Wait waits for notifications in flight, for tests and shutdown.
func (n *Notifier) Wait() { n.wg.Wait() }

// control is the control API client of the gateway at url: Connect's protocol with the proto
// codec, on the Notifier's client (its internal certificate, HTTP/2, 2-second timeout).
func (n *Notifier) control(url string) gatewayv1connect.GatewayControlServiceClient {
	return gatewayv1connect.NewGatewayControlServiceClient(n.client, url)
}

// logFailure logs a notification that did not arrive, if err says so: a gateway that answered
// with an error refused it (a bug on one side, so a warning), one that could not be reached
// will catch up in its own loops.
func (n *Notifier) logFailure(url, call string, err error) {
	switch {
	case err == nil:
	case connect.IsWireError(err):
		n.log.Warn("gateway refused notification", "url", url, "call", call, "code", connect.CodeOf(err).String(), "err", err)
	default:
		n.log.Info("notify gateway failed; its loop will catch up", "url", url, "call", call, "err", err)
	}
}

// idStrings is ids in their text form, as the control API takes them.
func idStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}
