package gateway

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/better-compute/better-compute/gen/db"
)

// PokeWindow is how long the Notifier gathers the nodes of committed commands before it pokes
// their gateways: the commits of a few milliseconds cost one query and one poke per gateway,
// instead of one each per create call, at the price of that much dispatch latency.
const PokeWindow = 2 * time.Millisecond

// notifyTimeout bounds a round of notification: its query and its requests.
const notifyTimeout = 5 * time.Second

// Notifier is the API's side of the control API: after a commit it pokes the gateways that hold
// the affected nodes' sessions. Every call is best effort and returns at once.
//
// Pokes are batched: CommandsCreated adds the nodes to a set, and one flusher at a time, started
// by the first addition, waits PokeWindow, takes the set, finds its gateways in one query and
// sends each gateway one request; additions meanwhile wait for the next round. So at most one
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
		n.post(ctx, url+controlPoke, ids)
	}
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
		for _, gw := range gws {
			if gw.ControlUrl != "" {
				n.post(ctx, gw.ControlUrl+controlRevoke, nodeIDs)
			}
		}
	})
}

// Wait waits for notifications in flight, for tests and shutdown.
func (n *Notifier) Wait() { n.wg.Wait() }

func (n *Notifier) post(ctx context.Context, url string, nodeIDs []uuid.UUID) {
	body, _ := json.Marshal(controlRequest{NodeIDs: nodeIDs})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		n.log.Warn("notify gateway", "url", url, "err", err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := n.client.Do(req)
	if err != nil {
		n.log.Info("notify gateway failed; its loop will catch up", "url", url, "err", err)
		return
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		n.log.Warn("gateway refused notification", "url", url, "status", res.StatusCode)
	}
}
