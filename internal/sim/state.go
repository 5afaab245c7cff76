package sim

import (
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/better-compute/better-compute/internal/daemon"
)

// storedIdentity is a machine's identity on disk, so a restarted simulator (dev) reconnects as
// the same nodes instead of joining new ones.
type storedIdentity struct {
	NodeID      string `json:"nodeId"`
	TrustDomain string `json:"trustDomain"`
	Key         string `json:"key"`
	Chain       string `json:"chain"`
	Root        string `json:"root"`
}

// minRemaining is the certificate lifetime a stored identity must have left to be reused; an
// older one is replaced by a fresh join.
const minRemaining = time.Hour

func identityPath(dir, hostname string) string { return filepath.Join(dir, hostname+".json") }

// loadIdentity returns the machine's stored identity when it is usable with rootPEM: issued under
// the same root and valid for at least minRemaining. Nothing usable is (nil, nil).
func loadIdentity(dir, hostname string, rootPEM []byte) (*daemon.Identity, error) {
	data, err := os.ReadFile(identityPath(dir, hostname))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s storedIdentity
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, nil // unreadable: join again
	}
	if !bytes.Equal(bytes.TrimSpace([]byte(s.Root)), bytes.TrimSpace(rootPEM)) {
		return nil, nil // another deployment's
	}
	block, _ := pem.Decode([]byte(s.Key))
	if block == nil {
		return nil, nil
	}
	key, err := x509.ParseECPrivateKey(block.Bytes)
	if err != nil {
		return nil, nil
	}
	id := &daemon.Identity{NodeID: s.NodeID, TrustDomain: s.TrustDomain, Key: key, ChainPEM: []byte(s.Chain), RootPEM: []byte(s.Root)}
	notAfter, err := id.NotAfter()
	if err != nil || time.Until(notAfter) < minRemaining {
		return nil, nil
	}
	return id, nil
}

// saveIdentity writes the identity, readable by its owner only (it holds the private key).
func saveIdentity(dir, hostname string, id *daemon.Identity) error {
	keyDER, err := x509.MarshalECPrivateKey(id.Key)
	if err != nil {
		return err
	}
	data, err := json.Marshal(storedIdentity{
		NodeID: id.NodeID, TrustDomain: id.TrustDomain,
		Key:   string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})),
		Chain: string(id.ChainPEM), Root: string(id.RootPEM),
	})
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("simulator state: %w", err)
	}
	path := identityPath(dir, hostname)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("simulator state: %w", err)
	}
	return os.Rename(tmp, path)
}
