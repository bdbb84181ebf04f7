package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// InstanceIdentity is what the node learns about itself from IMDS.
type InstanceIdentity struct {
	InstanceID   string
	InstanceType string
	Region       string
	Zone         string
}

// Metadata reads the node's identity.
type Metadata interface {
	InstanceIdentity(ctx context.Context) (InstanceIdentity, error)
}

// IMDS reads the identity document from the instance metadata service (IMDSv2,
// through aws-sdk-go-v2's imds client, as the upstream driver does).
type IMDS struct {
	client *imds.Client
}

// NewIMDS returns a metadata reader for endpoint (empty: the SDK's default, which
// honours AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254).
func NewIMDS(endpoint string) *IMDS {
	return &IMDS{client: imds.New(imds.Options{Endpoint: endpoint})}
}

// NewIMDSVia returns a metadata reader for endpoint whose connections dial makes: a
// node plugin that runs outside its node's network namespace reaches 169.254.169.254
// inside it.
func NewIMDSVia(endpoint string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *IMDS {
	tr := &http.Transport{DialContext: dial, Proxy: nil, MaxIdleConns: 2, IdleConnTimeout: 30 * time.Second}
	return &IMDS{client: imds.New(imds.Options{Endpoint: endpoint, HTTPClient: &http.Client{Transport: tr}})}
}

// InstanceIdentity implements Metadata.
func (m *IMDS) InstanceIdentity(ctx context.Context) (InstanceIdentity, error) {
	out, err := m.client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		return InstanceIdentity{}, fmt.Errorf("imds identity document: %w", err)
	}
	id := InstanceIdentity{
		InstanceID:   out.InstanceID,
		InstanceType: out.InstanceType,
		Region:       out.Region,
		Zone:         out.AvailabilityZone,
	}
	if id.InstanceID == "" || id.Zone == "" {
		return id, errors.New("imds identity document lacks instanceId or availabilityZone")
	}
	return id, nil
}

// StaticMetadata is a Metadata that returns a fixed identity (tests, and nodes told
// their identity on the command line).
type StaticMetadata InstanceIdentity

// InstanceIdentity implements Metadata.
func (m StaticMetadata) InstanceIdentity(context.Context) (InstanceIdentity, error) {
	return InstanceIdentity(m), nil
}
