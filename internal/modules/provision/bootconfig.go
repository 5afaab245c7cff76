package provision

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	provisiondb "github.com/better-compute/better-compute/gen/modules/provision/db"
	"github.com/better-compute/better-compute/internal/apierr"
	"github.com/better-compute/better-compute/internal/auth"
	"github.com/better-compute/better-compute/internal/provision"
)

// ticketPrefix starts a boot ticket: bcb_<machine id>_<secret>.
const ticketPrefix = "bcb_"

// maxTicketLen bounds the ticket machines/bootConfig reads.
const maxTicketLen = 128

// bootConfigRoute is the boot configuration's path below the API's URL.
const bootConfigRoute = "/machines/bootConfig"

// newTicket mints a boot ticket for machine id: the key (whose Hash is stored) and its string.
func newTicket(id uuid.UUID) auth.Key {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return auth.Key{Prefix: ticketPrefix, ID: id.String(), Secret: base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)}
}

// parseTicket splits a ticket into the machine's id and the key to match its stored hash.
func parseTicket(s string) (uuid.UUID, auth.Key, bool) {
	rest, ok := strings.CutPrefix(s, ticketPrefix)
	if !ok || len(s) > maxTicketLen {
		return uuid.Nil, auth.Key{}, false
	}
	idPart, secret, ok := strings.Cut(rest, "_")
	id, err := uuid.Parse(idPart)
	if !ok || err != nil || secret == "" {
		return uuid.Nil, auth.Key{}, false
	}
	return id, auth.Key{Prefix: ticketPrefix, ID: idPart, Secret: secret}, true
}

// bootConfigURL is where the machine with ticket fetches its boot configuration, once: a POST of
// {"ticket": "<the ticket parameter>"} to the URL.
func bootConfigURL(apiURL, ticket string) string {
	return strings.TrimSuffix(apiURL, "/") + bootConfigRoute + "?ticket=" + url.QueryEscape(ticket)
}

// bootPayload is the sealed boot configuration.
type bootPayload struct {
	Token   string `json:"token"`
	Gateway string `json:"gateway"`
	RootCA  string `json:"rootCA"`
}

// mintTicket records a boot ticket for the machine, expiring with its join token.
func (c *Controller) mintTicket(ctx context.Context, q *provisiondb.Queries, id uuid.UUID, expires time.Time) error {
	k := newTicket(id)
	if err := q.CreateBootTicket(ctx, provisiondb.CreateBootTicketParams{
		MachineID: id, SecretHash: k.Hash(), ExpiresAt: expires,
		TicketSealed: c.seal.boot.Seal([]byte(k.String()), []byte(id.String())),
	}); err != nil {
		return fmt.Errorf("record the machine's boot ticket: %w", err)
	}
	return nil
}

// withBootConfig records join, sealed, as what the machine's ticket serves, and returns join
// with the ticket's URL. A machine without a ticket (made before tickets existed), a deployment
// whose API URL is unknown (no baseURL) or a ticket already used leave join as it is.
func (c *Controller) withBootConfig(ctx context.Context, id uuid.UUID, join provision.Join) (provision.Join, error) {
	if c.apiURL == "" {
		return join, nil
	}
	q := provisiondb.New(c.pool)
	t, err := q.GetBootTicket(ctx, id)
	if errors.Is(err, pgx.ErrNoRows) {
		return join, nil
	}
	if err != nil {
		return join, fmt.Errorf("read the machine's boot ticket: %w", err)
	}
	if t.UsedAt != nil {
		return join, nil
	}
	ticket, err := c.seal.boot.Open(t.TicketSealed, []byte(id.String()))
	if err != nil {
		return join, provision.Permanent(fmt.Errorf("open the machine's boot ticket: %w", err))
	}
	b, err := json.Marshal(bootPayload{Token: join.Token, Gateway: join.Gateway, RootCA: string(join.RootCA)})
	if err != nil {
		return join, fmt.Errorf("encode the boot configuration: %w", err)
	}
	if err := q.SetBootConfig(ctx, provisiondb.SetBootConfigParams{MachineID: id, ConfigSealed: c.seal.boot.Seal(b, []byte(id.String()))}); err != nil {
		return join, fmt.Errorf("record the boot configuration: %w", err)
	}
	join.BootConfigURL = bootConfigURL(c.apiURL, string(ticket))
	return join, nil
}

// errBadTicket is the one answer to a ticket that is unknown, wrong, used or expired, so a
// caller without the ticket learns nothing about the machine.
var errBadTicket = apierr.PermissionDenied("the boot ticket is not valid: it is unknown, was used, or expired")

// bootable are the states in which a machine may fetch its boot configuration.
var bootable = []string{StateProvisioning, StateBooting}

// BootConfig serves a machine's boot configuration to the first caller with its ticket, and
// spends the ticket.
func (s *service) BootConfig(ctx context.Context, req *provisionmodulev1.BootConfigRequest) (*provisionmodulev1.BootConfigResponse, error) {
	id, key, ok := parseTicket(req.GetTicket())
	if !ok {
		return nil, apierr.InvalidArgument("ticket", "must be the boot configuration URL's ticket, bcb_<machine id>_<secret>")
	}
	var (
		res    *provisionmodulev1.BootConfigResponse
		tenant uuid.UUID
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		q := provisiondb.New(tx)
		t, err := q.LockBootTicket(ctx, id)
		if errors.Is(err, pgx.ErrNoRows) {
			return errBadTicket
		}
		if err != nil {
			return fmt.Errorf("read boot ticket: %w", err)
		}
		if !key.Matches(t.SecretHash) || t.UsedAt != nil || !time.Now().Before(t.ExpiresAt) || !slices.Contains(bootable, t.State) || t.ConfigSealed == nil {
			return errBadTicket
		}
		b, err := s.open.seal.boot.Open(t.ConfigSealed, []byte(id.String()))
		if err != nil {
			return fmt.Errorf("open the boot configuration of machine %s: %w", id, err)
		}
		var p bootPayload
		if err := json.Unmarshal(b, &p); err != nil {
			return fmt.Errorf("decode the boot configuration of machine %s: %w", id, err)
		}
		if err := q.SpendBootTicket(ctx, id); err != nil {
			return fmt.Errorf("spend boot ticket: %w", err)
		}
		tenant = t.TenantID
		res = &provisionmodulev1.BootConfigResponse{
			MachineId: id.String(), Name: t.Name, JoinToken: p.Token, GatewayEndpoint: p.Gateway, RootCaPem: p.RootCA,
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.log.Info("machine fetched its boot configuration", "machine", id, "tenant", tenant)
	return res, nil
}
