package client

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial connects to the CSI driver at endpoint (unix:///path/csi.sock or an absolute
// path). The connection is lazy: Discover waits for the driver.
func Dial(endpoint string) (*grpc.ClientConn, error) {
	target, err := Target(endpoint)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("dial csi driver %s: %w", endpoint, err)
	}
	return conn, nil
}

// Target turns an endpoint into a gRPC unix target.
func Target(endpoint string) (string, error) {
	switch {
	case endpoint == "":
		return "", errors.New("csi endpoint is empty: want unix:///path/csi.sock")
	case strings.HasPrefix(endpoint, "unix://"):
		if !strings.HasPrefix(strings.TrimPrefix(endpoint, "unix://"), "/") {
			return "", fmt.Errorf("csi endpoint %q: socket path must be absolute", endpoint)
		}
		return endpoint, nil
	case strings.HasPrefix(endpoint, "/"):
		return "unix://" + endpoint, nil
	default:
		return "", fmt.Errorf("csi endpoint %q: want unix:///path/csi.sock", endpoint)
	}
}
