// node_links_store.cpp: the /comm/node_links table: row type, key, append, read (node_links_store.hpp).
#include "common/node_links_store.hpp"

namespace itertime::store {

h5::RowType row_type_of(h5::RowTag<NodeLinkRow>) {
  return ITERTIME_H5_ROW_TYPE(store::NodeLinkRow, host_a, host_b, node_a, node_b, latency_us, bandwidth_GBps, samples,
                              measured_utc);
}

std::string node_link_key(const std::string& host_a, const std::string& host_b) {
  return host_a < host_b ? host_a + "|" + host_b : host_b + "|" + host_a;
}

std::string node_link_key(const NodeLinkRow& row) {
  return node_link_key(h5::get_string(row.host_a), h5::get_string(row.host_b));
}

void append_node_link(h5::Store& store, const NodeLinkRow& row) { store.table<NodeLinkRow>(kNodeLinksTable).append(row); }

std::vector<NodeLinkRow> read_node_links(h5::Store& store) {
  if (!store.exists(kNodeLinksTable)) return {};
  return store.table<NodeLinkRow>(kNodeLinksTable).read_all();
}

}  // namespace itertime::store
