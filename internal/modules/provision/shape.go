package provision

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/better-compute/better-compute/internal/provision/simprovider"
)

// shapeKey is the key of a class's parameters that holds its machines' shape. The module keeps
// it to itself: providers are handed the parameters without it.
const shapeKey = "shape"

// Shape is what one machine of a class brings to a pool, as the placer counts it: the autoscaler
// provisions the fewest machines of this shape that make pending leases fit.
type Shape struct {
	// GPUs of GPUModel on the machine.
	GPUs     int32  `json:"gpus"`
	GPUModel string `json:"gpuModel"`
	CPUs     int32  `json:"cpus"`
	// MemoryBytes is the machine's memory.
	MemoryBytes int64 `json:"memoryBytes"`
}

// simShape is a sim machine's shape when its class names none: the inventory its FakeDaemon
// reports (internal/daemon's default fake inventory), 8 CPUs and 32 GiB.
var simShape = Shape{CPUs: 8, MemoryBytes: 32 << 30}

// Bounds of a shape.
const (
	maxShapeGPUs   = 1024
	maxShapeCPUs   = 1 << 16
	maxShapeMemory = 1 << 50
)

// classShape reads the shape of a class's machines from its parameters; a sim class without one
// has simShape. ok is false when the class has no shape: it cannot scale a pool.
func classShape(provider string, params []byte) (s Shape, ok bool, err error) {
	var top map[string]json.RawMessage
	if len(params) > 0 {
		if err := json.Unmarshal(params, &top); err != nil {
			return Shape{}, false, fmt.Errorf("parameters: %w", err)
		}
	}
	raw, has := top[shapeKey]
	if !has {
		if provider == simprovider.Kind {
			return simShape, true, nil
		}
		return Shape{}, false, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Shape{}, false, fmt.Errorf("shape: want {gpus, gpuModel, cpus, memoryBytes}: %w", err)
	}
	switch {
	case s.GPUs < 0 || s.GPUs > maxShapeGPUs:
		return Shape{}, false, fmt.Errorf("shape.gpus must be 0 to %d", maxShapeGPUs)
	case s.GPUs > 0 && s.GPUModel == "":
		return Shape{}, false, errors.New("shape.gpuModel is required with shape.gpus")
	case len(s.GPUModel) > 256:
		return Shape{}, false, errors.New("shape.gpuModel must be at most 256 bytes")
	case s.CPUs < 0 || s.CPUs > maxShapeCPUs:
		return Shape{}, false, fmt.Errorf("shape.cpus must be 0 to %d", maxShapeCPUs)
	case s.MemoryBytes < 0 || s.MemoryBytes > maxShapeMemory:
		return Shape{}, false, fmt.Errorf("shape.memoryBytes must be 0 to %d", int64(maxShapeMemory))
	case s.GPUs == 0 && s.CPUs == 0 && s.MemoryBytes == 0:
		return Shape{}, false, errors.New("shape must have GPUs, CPUs or memory")
	}
	return s, true, nil
}

// providerParams are a class's parameters as its provider sees them: without the shape.
func providerParams(params []byte) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(params, &top) != nil {
		return params
	}
	if _, has := top[shapeKey]; !has {
		return params
	}
	delete(top, shapeKey)
	out, err := json.Marshal(top)
	if err != nil {
		return params
	}
	return out
}
