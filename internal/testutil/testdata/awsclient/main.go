// Command awsclient is the program of the test image of IAM Roles for Service Accounts: it
// takes its credentials from the AWS SDK's default chain (in a pod of an annotated
// ServiceAccount, the web identity token the pod identity webhook projected, traded with
// STS's AssumeRoleWithWebIdentity), then calls sts:GetCallerIdentity and
// ec2:DescribeVolumes, and ec2:CreateVolume with -create-volume, at the endpoints the
// SDK resolves (the region's names, or AWS_ENDPOINT_URL[_<SERVICE>]; AWS_CA_BUNDLE for
// a private CA). It prints one JSON object (result) on stdout and exits 1 when a step
// failed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"
)

// result is what the program prints: each step's outcome, or its error.
type result struct {
	Region string `json:"region"`
	// Credentials: where they came from (the SDK's Source, e.g. WebIdentityCredentials)
	// and the access key ID; never the secret.
	Credentials *credentials `json:"credentials,omitempty"`
	Identity    *identity    `json:"identity,omitempty"`
	Volumes     []string     `json:"volumes"`
	Created     string       `json:"createdVolume,omitempty"`
	// Errors by step ("credentials", "sts:GetCallerIdentity", "ec2:DescribeVolumes",
	// "ec2:CreateVolume").
	Errors map[string]apiError `json:"errors,omitempty"`
}

type credentials struct {
	Source       string `json:"source"`
	AccessKeyID  string `json:"accessKeyId"`
	SessionToken bool   `json:"sessionToken"`
}

type identity struct {
	Account string `json:"account"`
	Arn     string `json:"arn"`
	UserID  string `json:"userId"`
}

// apiError is an error as AWS answered it (its code and HTTP status), or the SDK's
// message when no answer came.
type apiError struct {
	Code       string `json:"code,omitempty"`
	HTTPStatus int    `json:"httpStatus,omitempty"`
	Message    string `json:"message"`
}

func errorOf(err error) apiError {
	var out apiError
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		out.HTTPStatus = re.HTTPStatusCode()
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		out.Code, out.Message = ae.ErrorCode(), ae.ErrorMessage()
		return out
	}
	out.Message = err.Error()
	return out
}

func main() {
	create := flag.Bool("create-volume", false, "also create a 1 GiB gp3 volume in -zone")
	zone := flag.String("zone", "", "the new volume's availability zone (the region's first, a, when empty)")
	timeout := flag.Duration("timeout", time.Minute, "time for all the calls")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	res := run(ctx, *create, *zone)
	out, _ := json.Marshal(res)
	fmt.Println(string(out))
	if len(res.Errors) > 0 {
		os.Exit(1)
	}
}

func run(ctx context.Context, create bool, zone string) *result {
	res := &result{Volumes: []string{}, Errors: map[string]apiError{}}
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		res.Errors["config"] = errorOf(err)
		return res
	}
	res.Region = cfg.Region
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		res.Errors["credentials"] = errorOf(err)
		return res
	}
	res.Credentials = &credentials{Source: creds.Source, AccessKeyID: creds.AccessKeyID, SessionToken: creds.SessionToken != ""}

	if out, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}); err != nil {
		res.Errors["sts:GetCallerIdentity"] = errorOf(err)
	} else {
		res.Identity = &identity{Account: aws.ToString(out.Account), Arn: aws.ToString(out.Arn), UserID: aws.ToString(out.UserId)}
	}
	client := ec2.NewFromConfig(cfg)
	if out, err := client.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		res.Errors["ec2:DescribeVolumes"] = errorOf(err)
	} else {
		for _, v := range out.Volumes {
			res.Volumes = append(res.Volumes, aws.ToString(v.VolumeId))
		}
	}
	if create {
		if zone == "" {
			zone = cfg.Region + "a"
		}
		out, err := client.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1),
			VolumeType: ec2types.VolumeTypeGp3})
		if err != nil {
			res.Errors["ec2:CreateVolume"] = errorOf(err)
		} else {
			res.Created = aws.ToString(out.VolumeId)
		}
	}
	if len(res.Errors) == 0 {
		res.Errors = nil
	}
	return res
}
