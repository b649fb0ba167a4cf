import Hummingbird
import Projections
import UseCases

// What the views and the use cases answer, sent as JSON by the request context's encoder.
extension Page: ResponseEncodable {}
extension ItemResource: ResponseEncodable {}
extension BidResource: ResponseEncodable {}
extension LoanResource: ResponseEncodable {}
extension CartResource: ResponseEncodable {}
extension CardResource: ResponseEncodable {}
extension PrivateProfile: ResponseEncodable {}
extension PublicProfile: ResponseEncodable {}
extension Country: ResponseEncodable {}
extension BidHistoryEntry: ResponseEncodable {}
extension PaidCart: ResponseEncodable {}
extension Session: ResponseEncodable {}
extension MarketClusters: ResponseEncodable {}
extension MarketFacets: ResponseEncodable {}
extension SavedSearchResource: ResponseEncodable {}
extension ReviewResource: ResponseEncodable {}
extension MessageResource: ResponseEncodable {}
extension Notice: ResponseEncodable {}
