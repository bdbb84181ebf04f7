package cloudtest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
)

// ELBClient is a client of the Elastic Load Balancing (v2) API of kubelab's cloud, which
// shares the EC2 API's endpoint and files (see EC2Client).
func ELBClient(t testing.TB, endpoint, configFile, credentialsFile string) *elb.Client {
	t.Helper()
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(),
		awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		awsconfig.WithSharedConfigFiles([]string{configFile}),
		awsconfig.WithSharedCredentialsFiles([]string{credentialsFile}))
	if err != nil {
		t.Fatal(err)
	}
	return elb.NewFromConfig(awsCfg, func(o *elb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.RetryMaxAttempts = 1
	})
}
