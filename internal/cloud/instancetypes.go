package cloud

import (
	"sort"
	"strconv"
	"strings"
)

// instanceType is what EC2 publishes about one instance type that the cloud runs: its
// size and its network limits (network interfaces, and private IPv4 addresses on each
// interface, the primary one included).
type instanceType struct {
	VCPUs, CoresPerVCPU int
	MemoryMiB           int
	MaxENIs, IPv4PerENI int
	Performance         string
}

// instanceTypes are the instance types RunInstances accepts, with AWS's published limits.
var instanceTypes = map[string]instanceType{
	"t3.nano":    {2, 2, 512, 2, 2, "Up to 5 Gigabit"},
	"t3.micro":   {2, 2, 1024, 2, 2, "Up to 5 Gigabit"},
	"t3.small":   {2, 2, 2048, 3, 4, "Up to 5 Gigabit"},
	"t3.medium":  {2, 2, 4096, 3, 6, "Up to 5 Gigabit"},
	"t3.large":   {2, 2, 8192, 3, 12, "Up to 5 Gigabit"},
	"t3.xlarge":  {4, 2, 16384, 4, 15, "Up to 5 Gigabit"},
	"t3.2xlarge": {8, 2, 32768, 4, 15, "Up to 5 Gigabit"},
	"m5.large":   {2, 2, 8192, 3, 10, "Up to 10 Gigabit"},
	"m5.xlarge":  {4, 2, 16384, 4, 15, "Up to 10 Gigabit"},
	"m5.2xlarge": {8, 2, 32768, 4, 15, "Up to 10 Gigabit"},
	"m5.4xlarge": {16, 2, 65536, 8, 30, "Up to 10 Gigabit"},
	"c5.large":   {2, 2, 4096, 3, 10, "Up to 10 Gigabit"},
	"c5.xlarge":  {4, 2, 8192, 4, 15, "Up to 10 Gigabit"},
	"c5.2xlarge": {8, 2, 16384, 4, 15, "Up to 10 Gigabit"},
	"r5.large":   {2, 2, 16384, 3, 10, "Up to 10 Gigabit"},
	"r5.xlarge":  {4, 2, 32768, 4, 15, "Up to 10 Gigabit"},
	"r5.2xlarge": {8, 2, 65536, 4, 15, "Up to 10 Gigabit"},
}

// maxIPv4PerENI is the most private addresses any instance type allows on one interface:
// the limit of an interface that is not attached.
const maxIPv4PerENI = 50

// limitsOf returns the network limits of an instance type; a type the cloud does not
// know (one stored before RunInstances checked types) gets m5.large's.
func limitsOf(typ string) instanceType {
	if t, ok := instanceTypes[typ]; ok {
		return t
	}
	return instanceTypes["m5.large"]
}

type xmlInstanceTypeInfo struct {
	InstanceType      string `xml:"instanceType"`
	CurrentGeneration bool   `xml:"currentGeneration"`
	FreeTierEligible  bool   `xml:"freeTierEligible"`
	Hypervisor        string `xml:"hypervisor"`
	BareMetal         bool   `xml:"bareMetal"`
	VCPUInfo          struct {
		DefaultVCpus          int `xml:"defaultVCpus"`
		DefaultCores          int `xml:"defaultCores"`
		DefaultThreadsPerCore int `xml:"defaultThreadsPerCore"`
	} `xml:"vCpuInfo"`
	MemoryInfo struct {
		SizeInMiB int `xml:"sizeInMiB"`
	} `xml:"memoryInfo"`
	ProcessorInfo struct {
		Architectures []string `xml:"supportedArchitectures>item"`
	} `xml:"processorInfo"`
	NetworkInfo struct {
		NetworkPerformance        string `xml:"networkPerformance"`
		MaximumNetworkInterfaces  int    `xml:"maximumNetworkInterfaces"`
		MaximumNetworkCards       int    `xml:"maximumNetworkCards"`
		DefaultNetworkCardIndex   int    `xml:"defaultNetworkCardIndex"`
		Ipv4AddressesPerInterface int    `xml:"ipv4AddressesPerInterface"`
		Ipv6AddressesPerInterface int    `xml:"ipv6AddressesPerInterface"`
		Ipv6Supported             bool   `xml:"ipv6Supported"`
		EnaSupport                string `xml:"enaSupport"`
		NetworkCards              []struct {
			NetworkCardIndex         int    `xml:"networkCardIndex"`
			NetworkPerformance       string `xml:"networkPerformance"`
			MaximumNetworkInterfaces int    `xml:"maximumNetworkInterfaces"`
		} `xml:"networkCards>item"`
	} `xml:"networkInfo"`
	EbsInfo struct {
		EbsOptimizedSupport string `xml:"ebsOptimizedSupport"`
		EncryptionSupport   string `xml:"encryptionSupport"`
		NvmeSupport         string `xml:"nvmeSupport"`
	} `xml:"ebsInfo"`
	SupportedUsageClasses []string `xml:"supportedUsageClasses>item"`
}

type describeInstanceTypesResponse struct {
	respBase
	InstanceTypes []xmlInstanceTypeInfo `xml:"instanceTypeSet>item"`
	NextToken     string                `xml:"nextToken,omitempty"`
}

func toXMLInstanceType(name string, t instanceType) xmlInstanceTypeInfo {
	family, _, _ := strings.Cut(name, ".")
	x := xmlInstanceTypeInfo{InstanceType: name, CurrentGeneration: true, Hypervisor: "nitro",
		FreeTierEligible: name == "t3.micro", SupportedUsageClasses: []string{"on-demand", "spot"}}
	if xenFamilies[family] {
		x.Hypervisor = "xen"
	}
	x.VCPUInfo.DefaultVCpus, x.VCPUInfo.DefaultThreadsPerCore = t.VCPUs, t.CoresPerVCPU
	x.VCPUInfo.DefaultCores = t.VCPUs / t.CoresPerVCPU
	x.MemoryInfo.SizeInMiB = t.MemoryMiB
	x.ProcessorInfo.Architectures = []string{"x86_64"}
	n := &x.NetworkInfo
	n.NetworkPerformance, n.MaximumNetworkInterfaces, n.MaximumNetworkCards = t.Performance, t.MaxENIs, 1
	n.Ipv4AddressesPerInterface, n.Ipv6AddressesPerInterface, n.Ipv6Supported = t.IPv4PerENI, t.IPv4PerENI, true
	n.EnaSupport = "required"
	n.NetworkCards = append(n.NetworkCards, struct {
		NetworkCardIndex         int    `xml:"networkCardIndex"`
		NetworkPerformance       string `xml:"networkPerformance"`
		MaximumNetworkInterfaces int    `xml:"maximumNetworkInterfaces"`
	}{0, t.Performance, t.MaxENIs})
	x.EbsInfo.EbsOptimizedSupport, x.EbsInfo.EncryptionSupport, x.EbsInfo.NvmeSupport = "default", "supported", "required"
	return x
}

func (c *Cloud) describeInstanceTypes(p *params) (response, *apiError) {
	names := p.list("InstanceType")
	filters := p.filters()
	max := p.maxResults(5, 100)
	token := p.str("NextToken")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	var unknown []string
	for _, n := range names {
		if _, ok := instanceTypes[n]; !ok {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) > 0 {
		return nil, errf("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(unknown, ", "))
	}
	if dry {
		return nil, errDryRun()
	}
	var matched []string
	for name, t := range instanceTypes {
		if len(names) > 0 && !anyMatch(names, []string{name}) {
			continue
		}
		family, _, _ := strings.Cut(name, ".")
		ok, aerr := matchFilters(filters, func(f string) ([]string, bool) {
			switch f {
			case "instance-type":
				return []string{name}, true
			case "current-generation":
				return []string{"true"}, true
			case "hypervisor":
				if xenFamilies[family] {
					return []string{"xen"}, true
				}
				return []string{"nitro"}, true
			case "vcpu-info.default-vcpus":
				return []string{strconv.Itoa(t.VCPUs)}, true
			case "memory-info.size-in-mib":
				return []string{strconv.Itoa(t.MemoryMiB)}, true
			case "network-info.maximum-network-interfaces":
				return []string{strconv.Itoa(t.MaxENIs)}, true
			case "network-info.ipv4-addresses-per-interface":
				return []string{strconv.Itoa(t.IPv4PerENI)}, true
			case "processor-info.supported-architecture":
				return []string{"x86_64"}, true
			}
			return nil, false
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			matched = append(matched, name)
		}
	}
	sort.Strings(matched)
	page, next, aerr := paginate(matched, max, token)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeInstanceTypesResponse{NextToken: next}
	for _, name := range page {
		resp.InstanceTypes = append(resp.InstanceTypes, toXMLInstanceType(name, instanceTypes[name]))
	}
	return resp, nil
}
