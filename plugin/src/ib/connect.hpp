#pragma once
// Connection setup for the ib transport, polled by NCCL and never blocking:
//  1. the shared out-of-band handshake (oob/handshake.hpp: secret, magic, version, transport);
//  2. the connecting (sending) side creates its QPs (INIT) and FIFO and sends its QpMeta;
//  3. the accepting side checks it, creates its QPs (INIT) and answers with its own QpMeta;
//  4. the sender, now knowing both ends, plans both directions (planning.hpp), brings its QPs to
//     RTS with its half and sends the other half (PlanMessage);
//  5. the receiver brings its QPs to RTS with it and preposts its receives. CTS writes start only
//     after that, when the sender's QPs are past RTR.
// The socket then stays open as the connection's liveness channel.
#include <memory>
#include <string>
#include <vector>

#include "core/transport.hpp"
#include "ib/comms.hpp"
#include "ib/planning.hpp"
#include "oob/handshake.hpp"

namespace astral::plugin::ib {

// What a connection end needs from the transport.
struct EndpointSetup {
  std::shared_ptr<NetContext> ctx;
  IbDevice device;  // a port, or a virtual NIC of several
  int device_index = -1;
  IbConfig config;
  int timeout_ms = 30000;
  PlanInputs plan;  // the connecting side's; connection_id is filled after the handshake
};

class IbConnector {
 public:
  IbConnector(EndpointSetup setup, const oob::ListenHandle& handle,
              const sockaddr_storage& oob_address);
  // ncclSuccess with *send_comm null while in progress.
  ncclResult_t poll(std::unique_ptr<SendComm>* send_comm);

 private:
  ncclResult_t fail(const std::string& why);
  bool start_queues(std::string* why);

  enum class Stage { kHandshake, kSendMeta, kRecvMeta, kSendPlan };
  EndpointSetup setup_;
  ConnectionPlan plan_;
  oob::HandshakeConnector handshake_;
  oob::Established established_;
  Stage stage_ = Stage::kHandshake;
  std::unique_ptr<Queues> queues_;
  RegisteredArea<CtsArea> fifo_;
  QpMeta local_{}, peer_{};
  PlanMessage theirs_{};
  size_t moved_ = 0;
  int64_t deadline_ns_ = 0;
};

class IbListenComm final : public ListenComm {
 public:
  IbListenComm(EndpointSetup setup, oob::Fd fd, const oob::Secret& secret);
  ~IbListenComm() override;
  ncclResult_t accept(std::unique_ptr<RecvComm>* recv_comm) override;

 private:
  struct Pending;
  // Advances one pending connection; true once it is done (*recv_comm set) or dropped.
  bool step(Pending& p, std::unique_ptr<RecvComm>* recv_comm);
  bool start_queues(Pending& p, std::string* why);

  EndpointSetup setup_;
  oob::HandshakeListener handshake_;
  std::vector<std::unique_ptr<Pending>> pending_;
};

}  // namespace astral::plugin::ib
