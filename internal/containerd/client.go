package containerd

import (
	"fmt"
	"strings"
	"time"

	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// maxCRIMessage is the largest CRI message accepted (ListContainers on a busy node, image
// lists), as the kubelet allows.
const maxCRIMessage = 16 << 20

// Client is a CRI v1 client of one runtime endpoint, with containerd's own snapshots
// service on the same connection (image volumes, imagevolumes.go).
type Client struct {
	Runtime   runtimeapi.RuntimeServiceClient
	Image     runtimeapi.ImageServiceClient
	Snapshots snapshotsapi.SnapshotsClient
	conn      *grpc.ClientConn
}

// Dial returns a CRI client for endpoint, "unix:///path/to.sock" or a plain socket path.
// It does not wait for the runtime: calls fail (codes.Unavailable) until it listens. The
// connection is retried within at most 2 s after the runtime comes (back), as a local
// socket is cheap to try.
func Dial(endpoint string) (*Client, error) {
	target := endpoint
	if !strings.HasPrefix(target, "unix://") {
		target = "unix://" + target
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxCRIMessage), grpc.MaxCallSendMsgSize(maxCRIMessage)),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("dial CRI at %s: %w", endpoint, err)
	}
	return &Client{
		Runtime:   runtimeapi.NewRuntimeServiceClient(conn),
		Image:     runtimeapi.NewImageServiceClient(conn),
		Snapshots: snapshotsapi.NewSnapshotsClient(conn),
		conn:      conn,
	}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }
