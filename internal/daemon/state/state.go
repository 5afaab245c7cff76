// Package state is bcd's state directory (/var/lib/bcd by default): the node's private key, its
// certificate chain, the root CA that gateways chain to, what the node joined as, the record of
// commands it ran, whether it is draining, and the policy an operator may leave there.
//
// The directory is 0700 and every file in it 0600, owned by the user bcd runs as. Load checks
// all of it before bcd runs, and refuses a state it cannot trust with an error naming the file:
// wrong permissions or owner, a key that does not belong to the certificate, a certificate of
// another node. Files are replaced atomically (write, sync, rename), so a crash leaves the old
// or the new content, never half of one.
package state

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
)

// DefaultDir is where bcd keeps its state unless told otherwise.
const DefaultDir = "/var/lib/bcd"

// The files of a state directory.
const (
	// KeyFile is the node's private key (PEM, "EC PRIVATE KEY"); it never leaves the host.
	KeyFile = "key.pem"
	// ChainFile is the node certificate followed by its CA (PEM); renewals replace it.
	ChainFile = "chain.pem"
	// RootCAFile is the root CA that gateways' certificates chain to (PEM).
	RootCAFile = "root-ca.pem"
	// NodeFile says what the node joined as and where (JSON, see Node).
	NodeFile = "node.json"
	// AllowExecFile is the operator's exec allow list: one absolute program path a line, '#'
	// starts a comment. Optional; bcd run --allow-exec adds to it.
	AllowExecFile = "allow-exec"
	// ConfigFile is the configuration the last "configure" command applied (JSON, the NodeSpec's
	// config), for the host's own tools to read.
	ConfigFile = "config.json"
	// DrainingFile exists while the node is draining (a "drain" command created it).
	DrainingFile = "draining"
	// ResultsDir holds the record of commands by idempotency key (see Record).
	ResultsDir = "results"
	// SocketFile is the running daemon's local health endpoint (HTTP over a unix socket).
	SocketFile = "bcd.sock"
	// LockFile is locked by the running daemon, so two cannot share a state directory.
	LockFile = "bcd.lock"
	// TransportFile is what --transport auto learned: whether the direct path to the gateway
	// failed, and since when (JSON, daemon.Choice).
	TransportFile = "transport.json"
	// WebSocketCAFile is the CA of the WebSocket's outer TLS given to bcd join
	// --websocket-ca-file (PEM), kept for bcd run. Optional.
	WebSocketCAFile = "websocket-ca.pem"
)

// Node is what a node joined as, and where its gateway is.
type Node struct {
	NodeID      string `json:"nodeId"`
	TrustDomain string `json:"trustDomain"`
	// Gateway is "host:port" of the gateway (or the balancer in front of gateways).
	Gateway string `json:"gateway"`
	// ServerName, when set, is the name the gateway's certificate is checked against instead of
	// the host of Gateway.
	ServerName string `json:"serverName,omitempty"`
	// Transport is how the node joined (bcd join --transport), what bcd run uses unless told
	// otherwise; "" is h2. WebSocketURL is the gateway's WebSocket listener it was given.
	Transport    string    `json:"transport,omitempty"`
	WebSocketURL string    `json:"websocketUrl,omitempty"`
	Hostname     string    `json:"hostname,omitempty"`
	JoinedAt     time.Time `json:"joinedAt"`
}

// Dir is a state directory.
type Dir struct {
	Path string
}

// New returns the state directory at path, which need not exist yet.
func New(path string) (*Dir, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	return &Dir{Path: abs}, nil
}

// File is the path of a file of the directory.
func (d *Dir) File(name string) string { return filepath.Join(d.Path, name) }

// Joined reports whether the directory holds an identity (its node file exists).
func (d *Dir) Joined() bool {
	_, err := os.Lstat(d.File(NodeFile))
	return err == nil
}

// ErrNotJoined is returned by Load when the directory holds no identity.
var ErrNotJoined = errors.New("this node has not joined: run bcd join first")

// Create makes the directory (0700) for a join, and fails if it already holds an identity. An
// existing directory is used as it is, and refused if others can enter it: it is not bcd's to
// chmod (think --state-dir /tmp).
func (d *Dir) Create() error {
	if _, err := os.Lstat(d.Path); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(d.Path), 0o755); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		if err := os.Mkdir(d.Path, 0o700); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
		// The umask can only have narrowed 0700; set it exactly all the same.
		if err := os.Chmod(d.Path, 0o700); err != nil {
			return fmt.Errorf("state directory: %w", err)
		}
	}
	if err := d.checkDir(); err != nil {
		return err
	}
	if d.Joined() {
		return fmt.Errorf("state directory %s already holds the identity of a node (%s): remove the directory to join as a new node", d.Path, d.File(NodeFile))
	}
	return nil
}

// SaveJoin writes a fresh identity: key, chain, root CA, then the node file last, so a join
// interrupted half way leaves a directory that is not yet Joined.
func (d *Dir) SaveJoin(id *daemon.Identity, n Node) error {
	keyDER, err := x509.MarshalECPrivateKey(id.Key)
	if err != nil {
		return fmt.Errorf("encode node key: %w", err)
	}
	n.NodeID, n.TrustDomain = id.NodeID, id.TrustDomain
	node, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{
		{KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})},
		{ChainFile, id.ChainPEM},
		{RootCAFile, id.RootPEM},
		{NodeFile, append(node, '\n')},
	} {
		if err := d.write(f.name, f.data); err != nil {
			return err
		}
	}
	return nil
}

// SaveWebSocketCA keeps the WebSocket's outer CA given at join (mode 0600), so bcd run trusts
// it without being told again. Call it before SaveJoin.
func (d *Dir) SaveWebSocketCA(pemData []byte) error { return d.write(WebSocketCAFile, pemData) }

// WebSocketCA is the WebSocket's outer CA kept at join; nil when none was given. Like the other
// files, it must be a plain file of bcd's user that no one else can write.
func (d *Dir) WebSocketCA() ([]byte, error) {
	if _, err := os.Lstat(d.File(WebSocketCAFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return d.readPrivate(WebSocketCAFile)
}

// SaveChain replaces the certificate chain after a renewal.
func (d *Dir) SaveChain(chainPEM []byte) error { return d.write(ChainFile, chainPEM) }

// Load reads and checks the identity, refusing anything it cannot trust with an error that
// names the file.
func (d *Dir) Load() (*daemon.Identity, Node, error) {
	var n Node
	if err := d.checkDir(); err != nil {
		return nil, n, err
	}
	if !d.Joined() {
		return nil, n, fmt.Errorf("state directory %s: %w", d.Path, ErrNotJoined)
	}
	files := map[string][]byte{}
	for _, name := range []string{NodeFile, KeyFile, ChainFile, RootCAFile} {
		data, err := d.readPrivate(name)
		if err != nil {
			return nil, n, err
		}
		files[name] = data
	}
	if err := json.Unmarshal(files[NodeFile], &n); err != nil {
		return nil, n, fmt.Errorf("%s: %w", d.File(NodeFile), err)
	}
	if n.NodeID == "" || n.Gateway == "" {
		return nil, n, fmt.Errorf("%s: names no node id or gateway", d.File(NodeFile))
	}
	key, err := parseKey(files[KeyFile])
	if err != nil {
		return nil, n, fmt.Errorf("%s: %w", d.File(KeyFile), err)
	}
	chain, err := parseCerts(files[ChainFile])
	if err != nil {
		return nil, n, fmt.Errorf("%s: %w", d.File(ChainFile), err)
	}
	if _, err := parseCerts(files[RootCAFile]); err != nil {
		return nil, n, fmt.Errorf("%s: %w", d.File(RootCAFile), err)
	}
	leaf := chain[0]
	if pub, ok := leaf.PublicKey.(*ecdsa.PublicKey); !ok || !pub.Equal(&key.PublicKey) {
		return nil, n, fmt.Errorf("%s: the key does not belong to the certificate in %s", d.File(KeyFile), d.File(ChainFile))
	}
	want := "spiffe://" + n.TrustDomain + "/node/" + n.NodeID
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != want {
		return nil, n, fmt.Errorf("%s: the certificate is not node %s's (%s); want %s", d.File(ChainFile), n.NodeID, uris(leaf), want)
	}
	if now := time.Now(); now.After(leaf.NotAfter) {
		return nil, n, fmt.Errorf("%s: the node certificate expired at %s, so no gateway accepts it: join again (remove %s, then bcd join)",
			d.File(ChainFile), leaf.NotAfter.UTC().Format(time.RFC3339), d.Path)
	}
	id := &daemon.Identity{NodeID: n.NodeID, TrustDomain: n.TrustDomain, Key: key, ChainPEM: files[ChainFile], RootPEM: files[RootCAFile]}
	if _, err := id.Certificate(); err != nil {
		return nil, n, fmt.Errorf("%s with %s: %w", d.File(KeyFile), d.File(ChainFile), err)
	}
	return id, n, nil
}

// ReadNode reads the node file alone, for reports (bcd status) that should work even when the
// rest of the state is broken.
func (d *Dir) ReadNode() (Node, error) {
	var n Node
	data, err := os.ReadFile(d.File(NodeFile))
	if errors.Is(err, fs.ErrNotExist) {
		return n, fmt.Errorf("state directory %s: %w", d.Path, ErrNotJoined)
	}
	if err != nil {
		return n, err
	}
	if err := json.Unmarshal(data, &n); err != nil {
		return n, fmt.Errorf("%s: %w", d.File(NodeFile), err)
	}
	return n, nil
}

// CertNotAfter reads when the stored node certificate expires.
func (d *Dir) CertNotAfter() (time.Time, error) {
	data, err := os.ReadFile(d.File(ChainFile))
	if err != nil {
		return time.Time{}, err
	}
	certs, err := parseCerts(data)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s: %w", d.File(ChainFile), err)
	}
	return certs[0].NotAfter, nil
}

// AllowExec reads the operator's exec allow list; no file is an empty list. The file decides
// what runs as bcd's user, so it must not be writable by others, like the directory it is in.
func (d *Dir) AllowExec() ([]string, error) {
	path := d.File(AllowExecFile)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := checkOwner(path, fi, 0o022); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for i, line := range strings.Split(string(data), "\n") {
		if c := strings.IndexByte(line, '#'); c >= 0 {
			line = line[:c]
		}
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !filepath.IsAbs(line) || filepath.Clean(line) != line {
			return nil, fmt.Errorf("%s:%d: %q is not a clean absolute path", path, i+1, line)
		}
		out = append(out, line)
	}
	return out, nil
}

// Draining reports whether the node is draining, and since when.
func (d *Dir) Draining() (bool, time.Time, error) {
	fi, err := os.Lstat(d.File(DrainingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return false, time.Time{}, nil
	}
	if err != nil {
		return false, time.Time{}, err
	}
	return true, fi.ModTime(), nil
}

// SetDraining records whether the node is draining.
func (d *Dir) SetDraining(on bool) error {
	if !on {
		err := os.Remove(d.File(DrainingFile))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if ok, _, err := d.Draining(); err != nil || ok {
		return err
	}
	return d.write(DrainingFile, []byte(time.Now().UTC().Format(time.RFC3339)+"\n"))
}

// Config returns the configuration the last configure command applied; nil when none did.
func (d *Dir) Config() ([]byte, error) {
	b, err := os.ReadFile(d.File(ConfigFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.File(ConfigFile), err)
	}
	return b, nil
}

// SaveConfig replaces the applied configuration atomically (mode 0600).
func (d *Dir) SaveConfig(data []byte) error { return d.write(ConfigFile, data) }

// Lock takes the directory's lock for a running daemon, failing when another process holds it.
// The kernel drops the lock when the process ends, however it ends.
func (d *Dir) Lock() (unlock func(), err error) {
	path := d.File(LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s: another bcd (pid %s) is running with state directory %s", path, strings.TrimSpace(string(holder)), d.Path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}

// checkDir checks that the directory exists, is a directory owned by this user, and lets no one
// else in.
func (d *Dir) checkDir() error {
	fi, err := os.Lstat(d.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("state directory %s: %w", d.Path, ErrNotJoined)
	}
	if err != nil {
		return fmt.Errorf("state directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("state directory %s: not a directory", d.Path)
	}
	return checkOwner(d.Path, fi, 0o077)
}

// readPrivate reads a file that must be a regular file of this user that no one else can read
// or write.
func (d *Dir) readPrivate(name string) ([]byte, error) {
	path := d.File(name)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: missing; the state directory is incomplete (remove it and join again)", path)
	}
	if err != nil {
		return nil, err
	}
	if err := checkOwner(path, fi, 0o077); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}

// checkOwner refuses a path that is a symbolic link, belongs to another user, or has any of the
// permission bits in forbidden.
func checkOwner(path string, fi fs.FileInfo, forbidden fs.FileMode) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: is a symbolic link; bcd only trusts plain files it owns", path)
	}
	want := fs.FileMode(0o600)
	if fi.IsDir() {
		want = 0o700
	}
	if perm := fi.Mode().Perm(); perm&forbidden != 0 {
		return fmt.Errorf("%s: permissions %04o give other users access; want %04o (chmod %o %s)", path, perm, want, want, path)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int(st.Uid) != uid {
			return fmt.Errorf("%s: owned by uid %d, not by bcd's user (uid %d)", path, st.Uid, uid)
		}
	}
	return nil
}

// write replaces a file atomically with mode 0600.
func (d *Dir) write(name string, data []byte) error {
	return writeAtomic(d.Path, name, data)
}

func writeAtomic(dir, name string, data []byte) error {
	path := filepath.Join(dir, name)
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename there is nothing left to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

// syncDir makes a rename in dir durable.
func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func parseKey(data []byte) (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block: not a private key")
	}
	switch block.Type {
	case "EC PRIVATE KEY":
		return x509.ParseECPrivateKey(block.Bytes)
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		if ec, ok := k.(*ecdsa.PrivateKey); ok {
			return ec, nil
		}
		return nil, fmt.Errorf("a %T, not an ECDSA key", k)
	}
	return nil, fmt.Errorf("a PEM block of type %q, not a private key", block.Type)
}

func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := bytes.TrimSpace(data)
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return certs, nil
}

func uris(c *x509.Certificate) string {
	s := make([]string, len(c.URIs))
	for i, u := range c.URIs {
		s[i] = u.String()
	}
	if len(s) == 0 {
		return "no URI"
	}
	return strings.Join(s, ", ")
}
