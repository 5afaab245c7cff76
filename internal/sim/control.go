package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	daemonv1 "github.com/better-compute/better-compute/gen/go/bettercompute/daemon/v1"
	"github.com/better-compute/better-compute/internal/daemon"
	"github.com/better-compute/better-compute/internal/gpuhealth"
)

// The control API: a few JSON calls over a unix socket (ListenControl), by which a process
// outside the simulator (`better-compute sim inject`, a test, an operator rehearsing) makes its
// machines report GPU faults. Bodies are JSON objects of the types below; an error is answered
// with a ControlError and a 4xx status whose message starts with the request's field at fault.
const (
	// ControlInjectPath takes an InjectRequest and answers the machine's GPUHealthResponse.
	ControlInjectPath = "/v1/gpu/inject"
	// ControlClearPath takes a ClearRequest and answers the machine's (empty) GPUHealthResponse.
	ControlClearPath = "/v1/gpu/clear"
	// ControlHealthPath takes ?hostname= and answers the machine's GPUHealthResponse.
	ControlHealthPath = "/v1/gpu/health"
	// ControlLoadPath takes a LoadRequest and answers the machine's LoadResponse.
	ControlLoadPath = "/v1/gpu/load"
)

// LoadRequest sets the load profile of a machine's GPU (Fleet.SetGPULoad).
type LoadRequest struct {
	Hostname string `json:"hostname"`
	// GPU is the GPU's nvidia-smi index on the machine; every GPU of it when absent.
	GPU *int `json:"gpu,omitempty"`
	// Profile is idle, busy or bursty (daemon.LoadProfiles).
	Profile string `json:"profile"`
}

// LoadResponse is the load profiles of a machine's GPUs after the call.
type LoadResponse struct {
	Hostname string    `json:"hostname"`
	GPUs     []GPULoad `json:"gpus"`
}

// MaxControlBody is the most bytes a control request's body may have.
const MaxControlBody = 64 << 10

// InjectRequest makes a machine report a GPU signal (Fleet.InjectGPU).
type InjectRequest struct {
	// Hostname is the machine's ("sim-0003").
	Hostname string `json:"hostname"`
	// GPU is the GPU's nvidia-smi index on the machine; required except for node-wide checks
	// (driver_not_answering).
	GPU *int `json:"gpu,omitempty"`
	// Check is one of gpuhealth.Checks ("xid", "row_remap_pending", …).
	Check string `json:"check"`
	// Code is the check's code: the Xid for "xid", the recovery action for "recovery_action".
	Code int64 `json:"code,omitempty"`
	// Count is how many occurrences (1 when 0).
	Count int64 `json:"count,omitempty"`
	// Detail is the source's text; by default what the source would print.
	Detail string `json:"detail,omitempty"`
}

// ClearRequest removes every GPU signal of a machine (Fleet.ClearGPU).
type ClearRequest struct {
	Hostname string `json:"hostname"`
}

// GPUHealthResponse is the GPU health a machine reports after the call.
type GPUHealthResponse struct {
	Hostname   string      `json:"hostname"`
	Signals    []GPUSignal `json:"signals"`
	ProbeError string      `json:"probeError,omitempty"`
}

// GPUSignal is one signal of a GPUHealthResponse, as bettercompute.daemon.v1.GpuSignal.
type GPUSignal struct {
	GPUUUID   string    `json:"gpuUuid,omitempty"`
	PCIBusID  string    `json:"pciBusId,omitempty"`
	Check     string    `json:"check"`
	Code      int64     `json:"code"`
	Count     int64     `json:"count"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	Detail    string    `json:"detail,omitempty"`
}

// ControlError is the body of a control call that failed.
type ControlError struct {
	Error string `json:"error"`
}

// controlHandler serves the control API for a fleet.
type controlHandler struct {
	fleet *Fleet
	log   *slog.Logger
}

// ControlHandler is the control API of fleet, for ServeControl (or a test's own server).
func ControlHandler(fleet *Fleet) http.Handler {
	h := &controlHandler{fleet: fleet, log: fleet.log}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+ControlInjectPath, h.inject)
	mux.HandleFunc("POST "+ControlClearPath, h.clear)
	mux.HandleFunc("GET "+ControlHealthPath, h.health)
	mux.HandleFunc("POST "+ControlLoadPath, h.load)
	return mux
}

// fieldError is a request error that names its field.
type fieldError struct {
	status int
	field  string
	msg    string
}

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func badField(field, format string, args ...any) *fieldError {
	return &fieldError{status: http.StatusBadRequest, field: field, msg: fmt.Sprintf(format, args...)}
}

func (h *controlHandler) inject(w http.ResponseWriter, r *http.Request) {
	var req InjectRequest
	if err := decodeControl(w, r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	if err := validateInject(req); err != nil {
		writeControlError(w, err)
		return
	}
	gpu := -1
	if req.GPU != nil {
		gpu = *req.GPU
	}
	if err := h.fleet.InjectGPU(req.Hostname, gpu, req.Check, req.Code, req.Count, req.Detail); err != nil {
		writeControlError(w, fleetError(err))
		return
	}
	h.log.Info("GPU signal injected through the control socket", "host", req.Hostname, "gpu", gpu, "check", req.Check, "code", req.Code)
	h.respond(w, req.Hostname)
}

func (h *controlHandler) clear(w http.ResponseWriter, r *http.Request) {
	var req ClearRequest
	if err := decodeControl(w, r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	if req.Hostname == "" {
		writeControlError(w, badField("hostname", "required: the machine's hostname"))
		return
	}
	if err := h.fleet.ClearGPU(req.Hostname); err != nil {
		writeControlError(w, fleetError(err))
		return
	}
	h.log.Info("GPU signals cleared through the control socket", "host", req.Hostname)
	h.respond(w, req.Hostname)
}

func (h *controlHandler) load(w http.ResponseWriter, r *http.Request) {
	var req LoadRequest
	if err := decodeControl(w, r, &req); err != nil {
		writeControlError(w, err)
		return
	}
	switch _, perr := daemon.ParseLoadProfile(req.Profile); {
	case req.Hostname == "":
		writeControlError(w, badField("hostname", "required: the machine's hostname"))
		return
	case perr != nil:
		writeControlError(w, badField("profile", "%v", perr))
		return
	case req.GPU != nil && *req.GPU < 0:
		writeControlError(w, badField("gpu", "must be 0 or more, got %d", *req.GPU))
		return
	}
	gpu := -1
	if req.GPU != nil {
		gpu = *req.GPU
	}
	if err := h.fleet.SetGPULoad(req.Hostname, gpu, req.Profile); err != nil {
		writeControlError(w, fleetError(err))
		return
	}
	h.log.Info("GPU load set through the control socket", "host", req.Hostname, "gpu", gpu, "profile", req.Profile)
	loads, err := h.fleet.GPULoads(req.Hostname)
	if err != nil {
		writeControlError(w, fleetError(err))
		return
	}
	writeControlJSON(w, http.StatusOK, LoadResponse{Hostname: req.Hostname, GPUs: loads})
}

func (h *controlHandler) health(w http.ResponseWriter, r *http.Request) {
	host := r.URL.Query().Get("hostname")
	if host == "" {
		writeControlError(w, badField("hostname", "required: the machine's hostname"))
		return
	}
	h.respond(w, host)
}

// respond writes machine host's GPU health.
func (h *controlHandler) respond(w http.ResponseWriter, host string) {
	snap, err := h.fleet.GPUHealth(host)
	if err != nil {
		writeControlError(w, fleetError(err))
		return
	}
	writeControlJSON(w, http.StatusOK, healthResponse(host, snap))
}

// validateInject checks what the fleet does not: the fields' presence and bounds.
func validateInject(req InjectRequest) error {
	switch {
	case req.Hostname == "":
		return badField("hostname", "required: the machine's hostname")
	case req.Check == "":
		return badField("check", "required: one of %s", strings.Join(gpuhealth.Checks, ", "))
	case !slices.Contains(gpuhealth.Checks, req.Check):
		return badField("check", "unknown check %q: one of %s", req.Check, strings.Join(gpuhealth.Checks, ", "))
	case req.GPU == nil && req.Check != gpuhealth.CheckDriverNotAnswering:
		return badField("gpu", "required: the GPU's index on the machine (0 to 7 on an 8-GPU machine)")
	case req.GPU != nil && *req.GPU < 0:
		return badField("gpu", "must be 0 or more, got %d", *req.GPU)
	case req.Code < 0:
		return badField("code", "must be 0 or more, got %d", req.Code)
	case req.Count < 0:
		return badField("count", "must be 0 or more, got %d", req.Count)
	case len(req.Detail) > gpuhealth.MaxDetailBytes:
		return badField("detail", "%d bytes, at most %d", len(req.Detail), gpuhealth.MaxDetailBytes)
	}
	return nil
}

// fleetError names the field an error of the fleet is about.
func fleetError(err error) error {
	switch {
	case errors.Is(err, ErrNoMachine):
		return &fieldError{status: http.StatusNotFound, field: "hostname", msg: err.Error()}
	case errors.Is(err, ErrNotStarted):
		return &fieldError{status: http.StatusConflict, field: "hostname", msg: err.Error()}
	case errors.Is(err, ErrNoGPU):
		return badField("gpu", "%v", err)
	}
	return badField("signal", "%v", err)
}

// decodeControl reads a JSON request body of at most MaxControlBody bytes into v.
func decodeControl(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxControlBody))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	var tooBig *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return &fieldError{status: http.StatusRequestEntityTooLarge, field: "body", msg: fmt.Sprintf("larger than %d bytes", MaxControlBody)}
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return badField(typeErr.Field, "want a JSON %s, got %s", typeErr.Type, typeErr.Value)
	default:
		return badField("body", "not a JSON object of the request's fields: %v", err)
	}
}

func writeControlError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var fe *fieldError
	if errors.As(err, &fe) {
		status = fe.status
	}
	writeControlJSON(w, status, ControlError{Error: err.Error()})
}

func writeControlJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// healthResponse is a snapshot as the control API answers it.
func healthResponse(host string, h *daemonv1.GpuHealth) GPUHealthResponse {
	out := GPUHealthResponse{Hostname: host, Signals: []GPUSignal{}, ProbeError: h.GetProbeError()}
	for _, s := range h.GetSignals() {
		out.Signals = append(out.Signals, GPUSignal{
			GPUUUID: s.GetGpuUuid(), PCIBusID: s.GetPciBusId(), Check: s.GetCheck(), Code: s.GetCode(), Count: s.GetCount(),
			FirstSeen: s.GetFirstSeen().AsTime(), LastSeen: s.GetLastSeen().AsTime(), Detail: s.GetDetail(),
		})
	}
	return out
}

// ServeControl serves the control API of fleet on ln (ListenControl's) until ctx ends, then
// closes ln, which removes the socket.
func ServeControl(ctx context.Context, ln *ControlListener, fleet *Fleet) error {
	srv := &http.Server{Handler: ControlHandler(fleet), ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	defer stop()
	err := srv.Serve(ln)
	_ = ln.Close()
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("sim control socket %s: %w", ln.Path, err)
}

// StartControl serves fleet's control API on a socket at path (ListenControl) until ctx ends;
// the channel is closed once it stopped and removed the socket. Without a path it serves nothing
// and the channel is closed already.
func StartControl(ctx context.Context, path string, fleet *Fleet) (<-chan struct{}, error) {
	done := make(chan struct{})
	if path == "" {
		close(done)
		return done, nil
	}
	ln, err := ListenControl(path)
	if err != nil {
		return nil, err
	}
	go func() {
		defer close(done)
		if err := ServeControl(ctx, ln, fleet); err != nil {
			fleet.log.Error("simulator control socket", "err", err)
		}
	}()
	return done, nil
}
