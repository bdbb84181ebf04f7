package cloud

import (
	"fmt"
	"net/http"
	"strings"
)

// apiError is an EC2 error: its code, message and HTTP status.
type apiError struct {
	Code    string
	Message string
	Status  int
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errf(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}

func errMissing(param string) *apiError {
	return errf("MissingParameter", "The request must contain the parameter %s", param)
}

func errInvalid(param, value, why string) *apiError {
	return errf("InvalidParameterValue", "Invalid value '%s' for %s. %s", value, param, why)
}

func errInternal(err error) *apiError {
	return &apiError{Code: "InternalError", Message: "An internal error has occurred: " + err.Error(), Status: http.StatusInternalServerError}
}

func errDryRun() *apiError {
	return &apiError{Code: "DryRunOperation", Message: "Request would have succeeded, but DryRun flag is set.", Status: http.StatusPreconditionFailed}
}

func quoteList(ids []string) string {
	q := make([]string, len(ids))
	for i, id := range ids {
		q[i] = "'" + id + "'"
	}
	return strings.Join(q, ", ")
}

func errVolumeNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidVolume.NotFound", "The volume '%s' does not exist.", ids[0])
	}
	return errf("InvalidVolume.NotFound", "The volumes %s do not exist.", quoteList(ids))
}

func errInstanceNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", ids[0])
	}
	return errf("InvalidInstanceID.NotFound", "The instance IDs %s do not exist", quoteList(ids))
}

func errSnapshotNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", ids[0])
	}
	return errf("InvalidSnapshot.NotFound", "The snapshots %s do not exist.", quoteList(ids))
}

// checkID validates the shape of a resource id ("vol-", "i-", "snap-" then hex).
// idArg is an id read from a request and the prefix its form must have ("vol-", "i-", "snap-").
type idArg struct{ prefix, id string }

// checkArgs returns the first error met reading p's parameters, else the first of ids
// whose form is wrong: what an action checks before it looks anything up.
func (p *params) checkArgs(ids ...idArg) *apiError {
	if p.err != nil {
		return p.err
	}
	for _, a := range ids {
		if aerr := checkID(a.prefix, a.id); aerr != nil {
			return aerr
		}
	}
	return nil
}

func checkID(prefix, id string) *apiError {
	malformed := map[string]string{"vol-": "InvalidVolumeID.Malformed", "i-": "InvalidInstanceID.Malformed", "snap-": "InvalidSnapshotID.Malformed",
		"subnet-": "InvalidSubnetID.Malformed", "vpc-": "InvalidVpcID.Malformed", "eni-": "InvalidNetworkInterfaceID.Malformed"}[prefix]
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) < 8 || len(rest) > 17 || strings.Trim(rest, "0123456789abcdef") != "" {
		return errf(malformed, "Invalid id: \"%s\" (expecting \"%s...\")", id, prefix)
	}
	return nil
}
