package provision

import (
	"fmt"
	"log/slog"
	"net/http"

	"connectrpc.com/connect"
	"github.com/jackc/pgx/v5/pgxpool"

	provisionmodulev1 "github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1"
	"github.com/better-compute/better-compute/gen/go/bettercompute/modules/provision/v1/provisionmodulev1connect"
	"github.com/better-compute/better-compute/internal/admission"
	"github.com/better-compute/better-compute/module"
)

// service answers ProvisionModuleService calls.
type service struct {
	pool  *pgxpool.Pool
	admit *admission.Admitter
	open  opener
	cfg   *Config
	log   *slog.Logger
}

var _ provisionmodulev1connect.ProvisionModuleServiceHandler = (*service)(nil)

// services is the module's API: ProvisionModuleService, guarded like the core's.
func (m *Module) services() []module.Service {
	return []module.Service{{
		File: provisionmodulev1.File_bettercompute_modules_provision_v1_provision_proto,
		Mount: func(deps module.ServiceDeps, opts ...connect.HandlerOption) (string, http.Handler, error) {
			s, err := sealersFor(deps.Secret)
			if err != nil {
				return "", nil, err
			}
			svc := &service{
				pool: deps.Pool, admit: deps.Admitter, open: opener{providers: m.enabled(), seal: s, egress: egressOf(m.cfg)}, cfg: &m.cfg,
				log: deps.Logger,
			}
			path, h := provisionmodulev1connect.NewProvisionModuleServiceHandler(svc, opts...)
			return path, h, nil
		},
	}}
}

func sealersFor(secret string) (sealers, error) {
	s, err := newSealers(secret)
	if err != nil {
		return sealers{}, fmt.Errorf("provision module: %w", err)
	}
	return s, nil
}
