package vps

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"

	"github.com/better-compute/better-compute/internal/provision"
)

// notFoundCodes are EC2's answers for an instance id it does not know.
var notFoundCodes = []string{"InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed"}

// retryableCodes are client errors that waiting can cure: throttling, capacity, an instance in
// the middle of a transition.
var retryableCodes = []string{
	"RequestLimitExceeded", "Throttling", "ThrottlingException", "RequestThrottled",
	"InsufficientInstanceCapacity", "InsufficientCapacity", "IncorrectInstanceState", "IncorrectState",
	"ServiceUnavailable", "Unavailable", "InternalError", "InternalFailure",
	"RequestTimeout",
}

// classify wraps an EC2 error for the controller: an unknown instance wraps
// provision.ErrNotFound; throttling, capacity, server errors and failures to reach EC2 are
// returned as they are (retried); every other refusal (authentication, authorisation, invalid
// parameters, limits) is provision.Permanent, since asking again cannot change it.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("ec2: %s: %w", what, err)
	var api smithy.APIError
	if !errors.As(err, &api) {
		return err // the request did not get an answer: the network, a timeout, a cancelled context
	}
	code := api.ErrorCode()
	switch {
	case slices.Contains(notFoundCodes, code):
		return fmt.Errorf("%w (%w)", err, provision.ErrNotFound)
	case slices.Contains(retryableCodes, code):
		return err
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= http.StatusInternalServerError {
		return err
	}
	return provision.Permanent(err)
}
