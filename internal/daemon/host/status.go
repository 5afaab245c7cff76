package host

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/better-compute/better-compute/internal/daemon/state"
)

// Status is what bcd status reports: the running daemon's own account, from its health socket,
// or what the state directory says when no daemon answers.
type Status struct {
	// Running says a daemon answered on the state directory's socket.
	Running   bool      `json:"running"`
	PID       int       `json:"pid,omitempty"`
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"startedAt,omitzero"`
	StateDir  string    `json:"stateDir"`
	NodeID    string    `json:"nodeId,omitempty"`
	// TrustDomain and Gateway are from the join (the gateway as overridden by bcd run --gateway).
	TrustDomain string `json:"trustDomain,omitempty"`
	Gateway     string `json:"gateway,omitempty"`
	// Connected says the daemon holds a session with a gateway now; Sessions counts the
	// sessions it opened since it started.
	Connected bool `json:"connected"`
	Sessions  int  `json:"sessions"`
	// Transport is how the daemon's connections reach the gateway now: h2 (direct) or
	// websocket (bcd run --transport websocket, or auto after a fallback).
	Transport string `json:"transport,omitempty"`
	// LastError is why the last session ended or could not start.
	LastError    string    `json:"lastError,omitempty"`
	CertNotAfter time.Time `json:"certNotAfter,omitzero"`
	Draining     bool      `json:"draining"`
	AllowExec    []string  `json:"allowExec,omitempty"`
	AllowReboot  bool      `json:"allowReboot"`
	// AllowUpgrade says upgrades are allowed: releases from under ReleaseURL, signed by one of
	// ReleaseKeys (minisign key ids), their new binary rolled back unless it holds a session
	// within UpgradeDeadline.
	AllowUpgrade    bool     `json:"allowUpgrade"`
	ReleaseURL      string   `json:"releaseUrl,omitempty"`
	ReleaseKeys     []string `json:"releaseKeys,omitempty"`
	UpgradeDeadline string   `json:"upgradeDeadline,omitempty"`
	// Upgrade is the last upgrade's marker: one on trial, done, or rolled back and not yet
	// reported.
	Upgrade *state.Upgrade `json:"upgrade,omitempty"`
	// TunnelPorts is the tunnel allow list (bcd run --tunnel-port); Tunnels the tunnels open now.
	TunnelPorts []int `json:"tunnelPorts,omitempty"`
	Tunnels     int   `json:"tunnels"`
	// StateError, when no daemon answers, is what is wrong with the state directory (the
	// error bcd run would refuse to start with); empty when it is sound.
	StateError string `json:"stateError,omitempty"`
	// NotRunning, when no daemon answers, says why the socket gave no answer.
	NotRunning string `json:"notRunning,omitempty"`
}

// ReadStatus asks the daemon running with stateDir, and when none answers, reads the state
// directory. It fails only when the directory holds no identity at all.
func ReadStatus(ctx context.Context, stateDir string) (Status, error) {
	dir, err := state.New(stateDir)
	if err != nil {
		return Status{}, err
	}
	sock := dir.File(state.SocketFile)
	s, askErr := ask(ctx, sock)
	if askErr == nil {
		return s, nil
	}
	s = Status{StateDir: dir.Path, NotRunning: fmt.Sprintf("no daemon answers on %s: %v", sock, askErr)}
	n, err := dir.ReadNode()
	if err != nil {
		return s, err
	}
	s.NodeID, s.TrustDomain, s.Gateway = n.NodeID, n.TrustDomain, n.Gateway
	if t, err := dir.CertNotAfter(); err == nil {
		s.CertNotAfter = t.UTC()
	}
	s.Draining, _, _ = dir.Draining()
	if _, _, err := dir.Load(); err != nil {
		s.StateError = err.Error()
	}
	if allow, err := dir.AllowExec(); err == nil {
		s.AllowExec = allow
	}
	s.Upgrade, _ = dir.Upgrade()
	return s, nil
}

// ask gets the status from the daemon's health socket.
func ask(ctx context.Context, sock string) (Status, error) {
	var s Status
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://bcd/status", nil)
	if err != nil {
		return s, err
	}
	res, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return s, fmt.Errorf("status: %s", res.Status)
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&s); err != nil {
		return s, fmt.Errorf("status: %w", err)
	}
	return s, nil
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Format writes the status for people.
func (s Status) Format(w io.Writer) {
	row := func(k, v string) { fmt.Fprintf(w, "%-13s %s\n", k+":", v) }
	row("Node", s.NodeID)
	row("Gateway", s.Gateway)
	if s.Running {
		conn := "not connected"
		if s.Connected {
			conn = "connected"
			if s.Transport != "" {
				conn += " via " + s.Transport
			}
		}
		row("Daemon", fmt.Sprintf("running (pid %d, version %s, since %s), %s, %d sessions",
			s.PID, s.Version, s.StartedAt.Format(time.RFC3339), conn, s.Sessions))
	} else {
		row("Daemon", "not running ("+s.NotRunning+")")
	}
	if !s.CertNotAfter.IsZero() {
		left := time.Until(s.CertNotAfter).Round(time.Second)
		when := "expires " + s.CertNotAfter.Format(time.RFC3339) + " (in " + left.String() + ")"
		if left <= 0 {
			when = "EXPIRED at " + s.CertNotAfter.Format(time.RFC3339) + ": join again"
		}
		row("Certificate", when)
	}
	row("Draining", yesNo(s.Draining))
	allow := "nothing"
	if len(s.AllowExec) > 0 {
		allow = strings.Join(s.AllowExec, ", ")
	}
	row("Exec allows", allow)
	if s.Running {
		row("Reboot", map[bool]string{true: "allowed", false: "not allowed"}[s.AllowReboot])
		upgrade := "not allowed (no --release-url and --release-key)"
		if s.AllowUpgrade {
			upgrade = fmt.Sprintf("releases from %s signed by key %s; a new binary must hold a session within %s",
				s.ReleaseURL, strings.Join(s.ReleaseKeys, ", "), s.UpgradeDeadline)
		}
		row("Upgrade", upgrade)
		tunnels := "not allowed"
		if len(s.TunnelPorts) > 0 {
			ports := make([]string, len(s.TunnelPorts))
			for i, p := range s.TunnelPorts {
				ports[i] = strconv.Itoa(p)
			}
			tunnels = fmt.Sprintf("to 127.0.0.1 ports %s; %d open", strings.Join(ports, ", "), s.Tunnels)
		}
		row("Tunnels", tunnels)
	}
	if u := s.Upgrade; u != nil {
		last := fmt.Sprintf("%s to %s (command %s): %s", u.From, u.To, u.CommandID, u.State)
		switch {
		case u.Reason != "":
			last += ": " + u.Reason
		case u.State == state.UpgradeTrying:
			last += ", until " + u.Deadline.Format(time.RFC3339)
		case !u.FinishedAt.IsZero():
			last += " at " + u.FinishedAt.Format(time.RFC3339)
		}
		row("Last upgrade", last)
	}
	if s.LastError != "" {
		row("Last error", s.LastError)
	}
	if s.StateError != "" {
		row("State", "INVALID: "+s.StateError)
	}
	row("State dir", s.StateDir)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
