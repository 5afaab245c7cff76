package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/better-compute/better-compute/internal/release"
)

// releaseKeyEnv holds the signing key's content (the minisign.key file, or its base64 line) for
// CI, where writing the key to a file is the thing to avoid.
const releaseKeyEnv = "BETTER_COMPUTE_RELEASE_KEY"

func newReleaseCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "release",
		Short: "Make signing keys and build signed releases",
		Long: `Releases carry bcd and better-compute for linux/amd64 and linux/arm64, a manifest.json, a
SHA256SUMS over all of them and its minisign signature (SHA256SUMS.minisig). Anyone can check
one with Debian's minisign: minisign -Vm SHA256SUMS -p minisign.pub, then sha256sum -c SHA256SUMS.`,
	}
	cmd.AddCommand(newReleaseKeygenCommand(), newReleaseBuildCommand())
	return cmd
}

func newReleaseKeygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out DIR",
		Short: "Make a release signing key pair",
		Long: `Write a new minisign key pair to DIR: minisign.key (the secret, unencrypted, mode 0600; keep it
offline or in your CI's secret store) and minisign.pub (give it to install.sh --pubkey and to
nodes). Refuses to overwrite either file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			pub, sec, err := release.GenerateKey(nil)
			if err != nil {
				return err
			}
			secPath, pubPath := filepath.Join(out, release.SecretKeyFile), filepath.Join(out, release.PublicKeyFile)
			for _, p := range []string{secPath, pubPath} {
				if _, err := os.Lstat(p); err == nil {
					return fmt.Errorf("%s exists; refusing to overwrite a key", p)
				}
			}
			if err := os.MkdirAll(out, 0o700); err != nil {
				return fmt.Errorf("create %s: %w", out, err)
			}
			if err := writeNew(secPath, sec.Encode(), 0o600); err != nil {
				return err
			}
			if err := writeNew(pubPath, pub.Encode(), 0o644); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Secret key: %s (keep it secret; or pass its content in %s)\n", secPath, releaseKeyEnv)
			fmt.Fprintf(w, "Public key: %s\n%s\n", pubPath, pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for minisign.key and minisign.pub (created 0700 if missing)")
	return cmd
}

// writeNew creates path exclusively (never replacing a file) and writes data to it.
func writeNew(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newReleaseBuildCommand() *cobra.Command {
	var out, keyFile string
	cmd := &cobra.Command{
		Use:   "build VERSION --out DIR [--key FILE]",
		Short: "Build, checksum and sign a release",
		Long: `Build bcd and better-compute for linux/amd64 and linux/arm64 into DIR (which must not exist or be
empty) as PROGRAM_VERSION_linux_ARCH, reproducibly: the same source and Go toolchain give the
same bytes. Then write manifest.json, SHA256SUMS (sorted, covering the binaries and
manifest.json) and SHA256SUMS.minisig, signed with the key in --key FILE or, without --key, the
key's content in ` + releaseKeyEnv + `. Run it in a checkout of the repository; publish DIR as
it is under a base URL (install.sh --release-url BASE --version VERSION).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return errors.New("--out is required")
			}
			key, err := loadReleaseKey(keyFile)
			if err != nil {
				return err
			}
			m, err := release.Build(cmd.Context(), release.BuildOptions{Version: args[0], OutDir: out, Key: key, Log: cmd.ErrOrStderr()})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			for _, a := range m.Artifacts {
				fmt.Fprintf(w, "%s  %s\n", a.SHA256, filepath.Join(out, a.Name))
			}
			fmt.Fprintf(w, "Release %s in %s (verify: minisign -Vm %s -p minisign.pub)\n", m.Version, out, filepath.Join(out, release.ChecksumsFile))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "directory for the release")
	cmd.Flags().StringVar(&keyFile, "key", "", "the secret key file (default: its content in env "+releaseKeyEnv+")")
	return cmd
}

// loadReleaseKey reads the signing key from file or, when file is empty, from the environment.
// Errors name where the key came from, never what it holds.
func loadReleaseKey(file string) (*release.SecretKey, error) {
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("read the signing key: %w", err)
		}
		key, err := release.ParseSecretKey(data)
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", file, err)
		}
		return key, nil
	}
	env := os.Getenv(releaseKeyEnv)
	if env == "" {
		return nil, fmt.Errorf("no signing key: give --key FILE or set %s (make one with `better-compute release keygen`)", releaseKeyEnv)
	}
	key, err := release.ParseSecretKey([]byte(env))
	if err != nil {
		return nil, fmt.Errorf("signing key in %s: %w", releaseKeyEnv, err)
	}
	return key, nil
}
