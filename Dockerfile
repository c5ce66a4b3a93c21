FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY ops/constraints.txt ops/constraints.txt
COPY worker worker
COPY producer producer
COPY ops ops
RUN pip install --no-cache-dir -c ops/constraints.txt ".[mlflow]" && pip install --no-cache-dir google-colab-cli==0.7.4
RUN useradd --create-home colabq && mkdir -p /var/lib/colabq && chown colabq /var/lib/colabq
USER colabq
ENV HOME=/home/colabq
ENTRYPOINT ["/app/ops/docker-entrypoint.sh"]
