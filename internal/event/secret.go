package event

import "github.com/google/uuid"

// SecretRef is the payload of a secret's events: never its value.
type SecretRef struct {
	// ID is the secret's id.
	ID uuid.UUID `json:"id"`
	// Name is the secret's name.
	Name string `json:"name"`
}

// Subject is "secret/<id>".
func (e SecretRef) Subject() string { return "secret/" + e.ID.String() }

// SecretCreated is emitted by secrets/create.
type SecretCreated struct{ SecretRef }

// Type is "secret.created".
func (SecretCreated) Type() string { return "secret.created" }

// SecretUpdated is emitted by secrets/update when a secret's value is replaced.
type SecretUpdated struct{ SecretRef }

// Type is "secret.updated".
func (SecretUpdated) Type() string { return "secret.updated" }

// SecretDeleted is emitted by secrets/delete.
type SecretDeleted struct{ SecretRef }

// Type is "secret.deleted".
func (SecretDeleted) Type() string { return "secret.deleted" }
