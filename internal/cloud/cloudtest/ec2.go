package cloudtest

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// EC2Client is a client of the EC2 API of kubelab's cloud at endpoint, with the config
// and credentials files the cloud wrote (its Endpoint, ConfigFile and CredentialsFile).
func EC2Client(t testing.TB, endpoint, configFile, credentialsFile string) *ec2.Client {
	t.Helper()
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background(),
		awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		awsconfig.WithSharedConfigFiles([]string{configFile}),
		awsconfig.WithSharedCredentialsFiles([]string{credentialsFile}))
	if err != nil {
		t.Fatal(err)
	}
	return ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(endpoint) })
}
