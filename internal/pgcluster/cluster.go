// Package pgcluster runs a private PostgreSQL server, from the machine's PostgreSQL 16+ or else
// from a pinned PostgreSQL 17 build it downloads once into a cache (see Find), so that
// `better-compute dev` and the tests need no database set up by hand.
//
// A cluster lives in one directory: data/ (the data directory, which also holds the unix
// socket), password (the superuser's password, 0600) and postgres.log. It listens on the unix
// socket and on a free loopback port, and it accepts only password authentication, so other
// local users cannot reach it. PostgreSQL refuses to run as root; when the caller is root the
// server runs as the unprivileged `postgres` system user, or `nobody` where there is none (a
// machine without a PostgreSQL package), which then owns the directory.
package pgcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options configure a private cluster.
type Options struct {
	// Dir is the cluster directory. Empty means DefaultDir().
	Dir string
	// BinDir holds initdb and postgres. Empty means Find searches the usual places.
	BinDir string
	// Source selects system binaries, the pinned build, or either; empty means
	// BETTER_COMPUTE_POSTGRES, then SourceAuto.
	Source Source
	// CacheDir holds fetched builds; empty means DefaultCacheDir().
	CacheDir string
	// Ephemeral trades durability for speed (fsync, full-page writes and synchronous commit
	// off). For tests only: a crash can corrupt an ephemeral cluster.
	Ephemeral bool
	// Logger receives progress messages. Nil discards them.
	Logger *slog.Logger

	// accounts are the system users a root caller runs the server as, the first that exists;
	// nil means defaultAccounts. For tests.
	accounts []string
}

// defaultAccounts are the unprivileged users the server runs as when the caller is root.
var defaultAccounts = []string{"postgres", "nobody"}

// Cluster is a running private PostgreSQL server.
type Cluster struct {
	dir      string
	dataDir  string
	port     int
	password string
	cmd      *exec.Cmd
	exited   chan struct{}
	waitErr  error
	log      *slog.Logger
	bins     Binaries
}

// superuser is the role initdb creates; the cluster is private, so one role is enough.
const superuser = "postgres"

// DefaultDir is where `dev` keeps its cluster between runs: the user's cache directory, or
// /var/cache/better-compute for root, whose home is not reachable by the postgres user.
func DefaultDir() (string, error) {
	if os.Geteuid() == 0 {
		return "/var/cache/better-compute/postgres", nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w", err)
	}
	return filepath.Join(cache, "better-compute", "postgres"), nil
}

// Start initialises the cluster directory if it is new, starts the server and waits until it
// accepts connections. The caller must Stop it.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bins, err := Find(ctx, FindOptions{BinDir: opts.BinDir, Source: opts.Source, CacheDir: opts.CacheDir, Logger: log})
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = DefaultDir(); err != nil {
			return nil, err
		}
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	accounts := opts.accounts
	if accounts == nil {
		accounts = defaultAccounts
	}
	owner, err := serverUser(accounts)
	if err != nil {
		return nil, err
	}
	if owner != nil {
		if err := reachableByOthers(bins.Dir); err != nil {
			return nil, fmt.Errorf("the server's account cannot run the PostgreSQL binaries: %w", err)
		}
	}
	c := &Cluster{dir: dir, dataDir: filepath.Join(dir, "data"), log: log, bins: bins}
	if err := c.prepare(owner); err != nil {
		return nil, err
	}
	made, err := os.ReadFile(filepath.Join(c.dataDir, "PG_VERSION"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := c.initdb(ctx, bins, owner, opts.Ephemeral); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, fmt.Errorf("read the cluster's version: %w", err)
	case strings.TrimSpace(string(made)) != strconv.Itoa(bins.Major):
		return nil, fmt.Errorf("the cluster in %s was made by PostgreSQL %s, which %s cannot run: remove the directory to start over (dev: --fresh; its data is lost), or set %s to PostgreSQL %s's bin directory",
			dir, strings.TrimSpace(string(made)), bins, EnvBinDir, strings.TrimSpace(string(made)))
	}
	stopStale(c.dataDir)
	// A free port can be taken between our probe and the server's bind; try a few.
	for attempt := 0; ; attempt++ {
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		err = c.start(ctx, bins, owner, opts.Ephemeral)
		if err == nil || attempt == 2 || !strings.Contains(err.Error(), "could not bind") {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	log.Info("private PostgreSQL started", "dir", dir, "port", c.port)
	return c, nil
}

// URL is a connection URL for the named database over the loopback port.
func (c *Cluster) URL(database string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.UserPassword(superuser, c.password),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/" + database,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the loopback TCP port the server listens on.
func (c *Cluster) Port() int { return c.port }

// Dir is the cluster directory.
func (c *Cluster) Dir() string { return c.dir }

// Binaries are the server programs the cluster runs, and where they came from.
func (c *Cluster) Binaries() Binaries { return c.bins }

// Stop shuts the server down (fast shutdown: open transactions roll back, committed data is
// kept) and waits for it to exit, killing it if ctx ends first.
func (c *Cluster) Stop(ctx context.Context) error {
	if c.cmd == nil || c.cmd.Process == nil {
		return nil
	}
	select {
	case <-c.exited:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		c.log.Info("private PostgreSQL stopped", "dir", c.dir)
		return nil
	case <-ctx.Done():
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("stop PostgreSQL in %s: %w (killed)", c.dir, ctx.Err())
	}
}

// serverUser is the account the server runs as: the caller, or when the caller is root the
// first of accounts that exists. Nil means the caller.
func serverUser(accounts []string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	return lookupAccount(accounts)
}

func lookupAccount(accounts []string) (*syscall.Credential, error) {
	for _, name := range accounts {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil || uid == 0 {
			continue
		}
		gid, err := strconv.ParseUint(u.Gid, 10, 32)
		if err != nil {
			continue
		}
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("PostgreSQL refuses to run as root and none of the accounts %s exists to run it as; create one (useradd --system postgres) or run as an unprivileged user", strings.Join(accounts, ", "))
}

// reachableByOthers fails when a directory above path is not searchable by other users, who
// then cannot reach path.
func reachableByOthers(path string) error {
	for d := filepath.Dir(path); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("parent %s of %s: %w", d, path, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by other users, so they cannot reach %s (chmod o+x %s, or choose another directory)", d, path, d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// prepare creates the cluster directory and the password, and makes both reachable by the
// server's account.
func (c *Cluster) prepare(owner *syscall.Credential) error {
	// Parents we create are searchable, so the server's account can reach the directory.
	if err := os.MkdirAll(filepath.Dir(c.dir), 0o755); err != nil {
		return fmt.Errorf("create cluster directory %s: %w", c.dir, err)
	}
	if err := os.Mkdir(c.dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cluster directory %s: %w", c.dir, err)
	}
	pwFile := filepath.Join(c.dir, "password")
	pw, err := os.ReadFile(pwFile)
	switch {
	case errors.Is(err, os.ErrNotExist):
		pw = []byte(RandomToken())
		if err := os.WriteFile(pwFile, pw, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", pwFile, err)
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", pwFile, err)
	}
	c.password = strings.TrimSpace(string(pw))
	if owner == nil {
		return nil
	}
	// The server's account owns the cluster directory (but not the password file, which only
	// the caller reads) and must be able to walk down to it.
	if err := os.Chown(c.dir, int(owner.Uid), int(owner.Gid)); err != nil {
		return fmt.Errorf("give %s to the server's account (uid %d): %w", c.dir, owner.Uid, err)
	}
	if err := reachableByOthers(c.dir); err != nil {
		return fmt.Errorf("the server's account cannot reach the cluster directory: %w", err)
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context, bins Binaries, owner *syscall.Credential, ephemeral bool) error {
	pwFile := filepath.Join(c.dir, "initdb-password")
	if err := os.WriteFile(pwFile, []byte(c.password+"\n"), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", pwFile, err)
	}
	defer os.Remove(pwFile)
	if owner != nil {
		if err := os.Chown(pwFile, int(owner.Uid), int(owner.Gid)); err != nil {
			return fmt.Errorf("give %s to the server's account (uid %d): %w", pwFile, owner.Uid, err)
		}
	}
	args := []string{"-D", c.dataDir, "-U", superuser, "-A", "scram-sha-256", "--pwfile", pwFile,
		"-E", "UTF8", "--locale", "C"}
	if ephemeral {
		args = append(args, "--no-sync")
	}
	cmd := exec.CommandContext(ctx, bins.Initdb(), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: owner}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("initdb %s: %w: %s", c.dataDir, err, strings.TrimSpace(out.String()))
	}
	c.log.Info("initialised private PostgreSQL", "dir", c.dataDir, "took", time.Since(start))
	return nil
}

func (c *Cluster) start(ctx context.Context, bins Binaries, owner *syscall.Credential, ephemeral bool) error {
	logPath := filepath.Join(c.dir, "postgres.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	defer logFile.Close()
	args := []string{"-D", c.dataDir, "-p", strconv.Itoa(c.port), "-k", c.dataDir,
		"-c", "listen_addresses=127.0.0.1", "-c", "max_connections=200"}
	if ephemeral {
		args = append(args, "-c", "fsync=off", "-c", "full_page_writes=off", "-c", "synchronous_commit=off")
	}
	cmd := exec.Command(bins.Postgres(), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group: a Ctrl-C at the terminal reaches us, and we shut the server down in
	// order, instead of racing it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: owner}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bins.Postgres(), err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() {
		c.waitErr = cmd.Wait()
		close(c.exited)
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("PostgreSQL exited during start-up (%w): %s", c.waitErr, tail(logPath))
		default:
		}
		if err := c.ping(ctx); err == nil {
			return nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			_ = c.Stop(context.Background())
			return fmt.Errorf("PostgreSQL did not accept connections on port %d: %w: %s", c.port, err, tail(logPath))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (c *Cluster) ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// stopStale shuts down a server left running from this directory by a process that died
// without stopping it, so the new one can take the data directory.
func stopStale(dataDir string) {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil || pid <= 0 {
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte("postgres")) {
		return
	}
	if syscall.Kill(pid, syscall.SIGINT) != nil {
		return
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(pid, 0) != nil {
			return
		}
	}
}

// RandomToken returns 48 random hexadecimal characters, for passwords and secrets.
func RandomToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the end of the server log, for errors.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
