# colabq runs on the Python its test suite runs on (3.11). The official `colab` CLI needs
# Python >= 3.12, so it gets an interpreter of its own through uv (`uv tool install --python`),
# on PATH as `colab`.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ops/constraints.txt ops/constraints.txt
COPY worker worker
COPY producer producer
COPY ops ops
RUN pip install --no-cache-dir -c ops/constraints.txt ".[mlflow]" \
 && pip install --no-cache-dir uv==0.13.9 \
 && UV_TOOL_DIR=/opt/uv/tools UV_TOOL_BIN_DIR=/usr/local/bin UV_PYTHON_INSTALL_DIR=/opt/uv/python \
    uv tool install --python 3.12 google-colab-cli==0.7.5
RUN useradd --create-home colabq && mkdir -p /var/lib/colabq && chown colabq /var/lib/colabq
USER colabq
ENV HOME=/home/colabq
ENTRYPOINT ["/app/ops/docker-entrypoint.sh"]
