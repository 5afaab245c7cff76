package vps

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
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

// codePattern is what an error code quoted in a summary may look like.
var codePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]{0,63}$`)

// classify turns an EC2 error into a summary for the controller: an unknown instance wraps
// provision.ErrNotFound; throttling, capacity, server errors and failures to reach EC2 are
// returned as they are (retried); every other refusal (authentication, authorisation, invalid
// parameters, limits) is provision.Permanent, since asking again cannot change it.
//
// The summary says what was asked, the HTTP status and EC2's error code, never the answer's
// message or body: the error becomes the machine's reason, shown to the tenant and logged, and
// an endpoint that is not EC2 (an internal service a class was pointed at) must not have its
// answers read that way.
func classify(what string, err error) error {
	if err == nil {
		return nil
	}
	api, resp, summary := summarize(err)
	err = fmt.Errorf("ec2: %s: %w", what, summary)
	if resp == nil {
		return err // the request did not get an answer: the network, a timeout, a cancelled context
	}
	switch {
	case api != nil && slices.Contains(notFoundCodes, api.ErrorCode()):
		return fmt.Errorf("%w (%w)", err, provision.ErrNotFound)
	case api != nil && slices.Contains(retryableCodes, api.ErrorCode()):
		return err
	case resp.HTTPStatusCode() >= http.StatusInternalServerError:
		return err
	}
	return provision.Permanent(err)
}

// summarize returns an error that says what err says without quoting an answer: the status
// and error code when an answer came, err itself when none did (its text is then the SDK's and
// the network's, the endpoint wrote none of it), after err's API error and HTTP answer.
func summarize(err error) (smithy.APIError, *awshttp.ResponseError, error) {
	var resp *awshttp.ResponseError
	if !errors.As(err, &resp) || resp.Response == nil || resp.Response.Response == nil || resp.HTTPStatusCode() == 0 {
		return nil, nil, err // no answer: the SDK wraps a failed send in a ResponseError too
	}
	status := resp.HTTPStatusCode()
	text := fmt.Sprintf("HTTP %d %s", status, http.StatusText(status))
	var api smithy.APIError
	switch {
	case errors.Is(err, provision.ErrAnswerTooLarge):
		text += ": " + provision.ErrAnswerTooLarge.Error()
	case errors.As(err, &api) && codePattern.MatchString(api.ErrorCode()):
		text += ", error code " + api.ErrorCode()
	case errors.As(err, &api):
		text += ", an error code that is not EC2's"
		api = nil
	default:
		text += ", an answer that is not EC2's"
	}
	return api, resp, errors.New(text)
}
