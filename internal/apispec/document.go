package apispec

// The types below are the part of OpenAPI 3.1 the API's document uses. They are encoded with
// encoding/json, whose sorted map keys make the document byte-for-byte reproducible.

// Document is an OpenAPI 3.1 document.
type Document struct {
	OpenAPI           string                `json:"openapi"`
	Info              Info                  `json:"info"`
	JSONSchemaDialect string                `json:"jsonSchemaDialect,omitempty"`
	Servers           []Server              `json:"servers"`
	Security          []SecurityRequirement `json:"security"`
	Tags              []Tag                 `json:"tags"`
	Paths             map[string]*PathItem  `json:"paths"`
	Components        Components            `json:"components"`
}

// Info describes the API.
type Info struct {
	Title       string  `json:"title"`
	Version     string  `json:"version"`
	Description string  `json:"description"`
	License     License `json:"license"`
}

// License names the API's licence.
type License struct {
	Name       string `json:"name"`
	Identifier string `json:"identifier"`
}

// Server is where the paths are served: the base path, relative to the document's own URL.
type Server struct {
	URL         string `json:"url"`
	Description string `json:"description"`
}

// SecurityRequirement names the schemes an operation accepts; an empty list means none needed.
type SecurityRequirement map[string][]string

// Tag groups the operations of one route group.
type Tag struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
}

// PathItem holds the one operation of a short route: every method is a POST.
type PathItem struct {
	Post *Operation `json:"post"`
}

// Operation is one API method.
type Operation struct {
	OperationID string                `json:"operationId"`
	Summary     string                `json:"summary"`
	Description string                `json:"description"`
	Tags        []string              `json:"tags"`
	Parameters  []*Parameter          `json:"parameters,omitempty"`
	RequestBody *RequestBody          `json:"requestBody"`
	Responses   map[string]*Response  `json:"responses"`
	Security    []SecurityRequirement `json:"security,omitempty"`

	// Procedure is the native Connect and gRPC path of the same method.
	Procedure string `json:"x-better-compute-procedure"`
	// Permission is what the caller's roles must grant; empty for public methods.
	Permission string `json:"x-better-compute-permission,omitempty"`
	// Public methods need neither a credential nor the X-Better-Compute header.
	Public bool `json:"x-better-compute-public,omitempty"`
	// Idempotent methods accept an Idempotency-Key header.
	Idempotent bool `json:"x-better-compute-idempotent,omitempty"`
	// Audited methods write an audit entry with their change.
	Audited bool `json:"x-better-compute-audited,omitempty"`
	// Module names the module that serves the method, when it is not part of the core.
	Module string `json:"x-better-compute-module,omitempty"`
	// Example is the documented call: its body and the status it gets in a dev deployment.
	Example *OperationExample `json:"x-better-compute-example,omitempty"`
}

// OperationExample is a method's documented call, run by the reference's tests against dev.
type OperationExample struct {
	Body   string `json:"body"`
	Status int    `json:"status"`
	Note   string `json:"note,omitempty"`
}

// Parameter is a header an operation reads, or a reference to one in components.
type Parameter struct {
	Ref         string  `json:"$ref,omitempty"`
	Name        string  `json:"name,omitempty"`
	In          string  `json:"in,omitempty"`
	Description string  `json:"description,omitempty"`
	Required    bool    `json:"required,omitempty"`
	Schema      *Schema `json:"schema,omitempty"`
}

// RequestBody is the JSON request message.
type RequestBody struct {
	Required bool                  `json:"required"`
	Content  map[string]*MediaType `json:"content"`
}

// Response is a response, or a reference to one in components.
type Response struct {
	Ref         string                `json:"$ref,omitempty"`
	Description string                `json:"description,omitempty"`
	Content     map[string]*MediaType `json:"content,omitempty"`
}

// MediaType is a body's schema and, for requests, an example.
type MediaType struct {
	Schema  *Schema `json:"schema"`
	Example any     `json:"example,omitempty"`
}

// Components holds the schemas, shared parameters and responses, and security schemes.
type Components struct {
	Schemas         map[string]*Schema         `json:"schemas"`
	Parameters      map[string]*Parameter      `json:"parameters"`
	Responses       map[string]*Response       `json:"responses"`
	SecuritySchemes map[string]*SecurityScheme `json:"securitySchemes"`
}

// SecurityScheme is how a caller authenticates.
type SecurityScheme struct {
	Type        string `json:"type"`
	Scheme      string `json:"scheme"`
	Description string `json:"description"`
}

// Schema is a JSON Schema 2020-12 schema, as OpenAPI 3.1 uses it.
type Schema struct {
	Ref                  string             `json:"$ref,omitempty"`
	Type                 any                `json:"type,omitempty"` // a string, or a list of them
	Format               string             `json:"format,omitempty"`
	ContentEncoding      string             `json:"contentEncoding,omitempty"`
	Pattern              string             `json:"pattern,omitempty"`
	Title                string             `json:"title,omitempty"`
	Description          string             `json:"description,omitempty"`
	Enum                 []string           `json:"enum,omitempty"`
	Properties           map[string]*Schema `json:"properties,omitempty"`
	Required             []string           `json:"required,omitempty"`
	AdditionalProperties any                `json:"additionalProperties,omitempty"` // *Schema or bool
	Items                *Schema            `json:"items,omitempty"`
	Minimum              *int64             `json:"minimum,omitempty"`
	Maximum              *int64             `json:"maximum,omitempty"`
	Deprecated           bool               `json:"deprecated,omitempty"`
	Example              any                `json:"example,omitempty"`

	// order is the properties' declaration order, which the Markdown reference keeps.
	order []string
}
