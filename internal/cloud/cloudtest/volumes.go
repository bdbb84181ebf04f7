package cloudtest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// VolumesOfPV lists the cloud's volumes that the CSI driver made for the PV named pv
// (its CSIVolumeName tag), failing the test if the cloud cannot be asked.
func VolumesOfPV(t testing.TB, client *ec2.Client, pv string) []ec2types.Volume {
	t.Helper()
	out, err := client.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:CSIVolumeName"), Values: []string{pv}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Volumes
}
