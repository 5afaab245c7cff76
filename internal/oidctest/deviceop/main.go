// Command deviceop is zitadel's example OpenID provider (github.com/zitadel/oidc/v3/example/server,
// the release internal/oidctest pins) with one more client, "device" (secret "secret", HTTP basic
// authentication), allowed the device authorization grant that none of the example's clients may
// use, so that tests can sign in through the device flow. DEVICE_CLIENT=0 leaves that client out:
// then it is the example server itself. Everything else is the example's main (the same
// environment, PORT, REDIRECT_URI and USERS_FILE, issuer, clients and log) except where it
// listens: on 127.0.0.1 only, never on every interface as the example does, so a test's
// provider cannot be reached from another host.
//
// It is a module of its own so that the main module does not depend on zitadel; scripts/setup
// builds it next to the example server.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/zitadel/oidc/v3/example/server/config"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

func getUserStore(cfg *config.Config) (storage.UserStore, error) {
	if cfg.UsersFile == "" {
		return storage.NewUserStore(fmt.Sprintf("http://localhost:%s/", cfg.Port)), nil
	}
	return storage.StoreFromFile(cfg.UsersFile)
}

func main() {
	cfg := config.FromEnvVars(&config.Config{Port: "9998"})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{AddSource: true, Level: slog.LevelDebug}))
	issuer := fmt.Sprintf("http://localhost:%s/", cfg.Port)

	clients := []*storage.Client{
		storage.NativeClient("native", cfg.RedirectURI...),
		storage.WebClient("web", "secret", cfg.RedirectURI...),
		storage.WebClient("api", "secret", cfg.RedirectURI...),
	}
	if os.Getenv("DEVICE_CLIENT") != "0" {
		clients = append(clients, storage.DeviceClient("device", "secret"))
	}
	storage.RegisterClients(clients...)

	store, err := getUserStore(cfg)
	if err != nil {
		logger.Error("cannot create UserStore", "error", err)
		os.Exit(1)
	}
	router := exampleop.SetupServer(issuer, storage.NewStorage(store), logger, false)

	server := &http.Server{Addr: "127.0.0.1:" + cfg.Port, Handler: router}
	logger.Info("server listening, press ctrl+c to stop", "addr", issuer)
	if err := server.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		// The same message as the example's, which internal/oidctest recognizes as a failed listen.
		logger.Error("server terminated", "error", err)
		os.Exit(1)
	}
}
